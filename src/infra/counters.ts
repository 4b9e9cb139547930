// The `Counters` adapter: per-account validate calls per UTC day (the daily quota, api_calls_today).
// Embedded: in memory. Cluster: Redis (see redis-counters.ts), shared by all nodes.

export type CounterState = 'ok' | 'down' | 'embedded'

export interface Counters {
  /**
   * Counts one validate call of `accountId` today unless `limit` (null = unlimited) is already reached.
   * Returns false when the call is refused (and then it is not counted). Synchronous while the account
   * is far from its limit, so the hot path stays free of I/O. `now`: the request's clock reading.
   */
  take(accountId: string, limit: number | null, now?: number): boolean | Promise<boolean>
  /** Calls counted today (UTC) for the account, including ones not yet flushed. */
  today(accountId: string): Promise<number>
  /** Pushes batched counts to the shared store (no-op in memory). */
  flush(): Promise<void>
  state(): CounterState
  close(): Promise<void>
}

export const utcDay = (now = Date.now()) => new Date(now).toISOString().slice(0, 10)

/** Seconds until the next UTC midnight (the 429 `retry_after`). */
export function secondsToUtcMidnight(now = Date.now()): number {
  return Math.max(1, Math.ceil((nextUtcMidnight(now) - now) / 1000))
}

function nextUtcMidnight(now: number): number {
  const d = new Date(now)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
}

/** The UTC day (`YYYY-MM-DD`) of a time, formatted only when a day ends: a number compare per call. */
export class UtcDayClock {
  private day = ''
  private ends = 0

  at(now = Date.now()): string {
    if (now >= this.ends) {
      this.day = utcDay(now)
      this.ends = nextUtcMidnight(now)
    }
    return this.day
  }
}

export class MemoryCounters implements Counters {
  private clock = new UtcDayClock()
  private day = this.clock.at()
  private counts = new Map<string, number>()

  private roll(now = Date.now()) {
    const d = this.clock.at(now)
    if (d !== this.day) {
      this.day = d
      this.counts.clear()
    }
  }

  take(accountId: string, limit: number | null, now = Date.now()): boolean {
    this.roll(now)
    const n = this.counts.get(accountId) ?? 0
    if (limit !== null && n >= limit) return false
    this.counts.set(accountId, n + 1)
    return true
  }

  async today(accountId: string): Promise<number> {
    this.roll()
    return this.counts.get(accountId) ?? 0
  }

  async flush(): Promise<void> {}

  state(): CounterState {
    return 'embedded'
  }

  async close(): Promise<void> {}
}

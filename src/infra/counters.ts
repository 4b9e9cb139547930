// The `Counters` adapter: per-account validate calls per UTC day (the daily quota, api_calls_today).
// Embedded: in memory. Cluster: Redis (see redis-counters.ts), shared by all nodes.

export type CounterState = 'ok' | 'down' | 'embedded'

export interface Counters {
  /**
   * Counts one validate call of `accountId` today unless `limit` (null = unlimited) is already reached.
   * Returns false when the call is refused (and then it is not counted). Synchronous while the account
   * is far from its limit, so the hot path stays free of I/O.
   */
  take(accountId: string, limit: number | null): boolean | Promise<boolean>
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
  const d = new Date(now)
  const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
  return Math.max(1, Math.ceil((midnight - now) / 1000))
}

function nextUtcMidnight(now: number): number {
  const d = new Date(now)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
}

export class MemoryCounters implements Counters {
  private day = utcDay()
  /** When the current UTC day ends: a number compare per call instead of formatting a date. */
  private dayEnds = nextUtcMidnight(Date.now())
  private counts = new Map<string, number>()

  private roll() {
    const now = Date.now()
    if (now < this.dayEnds) return
    const d = utcDay(now)
    if (d !== this.day) {
      this.day = d
      this.counts.clear()
    }
    this.dayEnds = nextUtcMidnight(now)
  }

  take(accountId: string, limit: number | null): boolean {
    this.roll()
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

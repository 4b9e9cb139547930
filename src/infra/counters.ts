// The `Counters` adapter: per-account validate calls per UTC day (the daily quota, api_calls_today).
// Embedded: in memory. Cluster: Redis (see redis-counters.ts), shared by all nodes.
// Both add their counts to Postgres (daily_validate_calls) in their batched flush, off the request
// path, so a restarted node or a Redis that comes back empty restores the day's count from there.
import type { Sql } from './db'

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

export function nextUtcMidnight(now: number): number {
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

export interface DailyCalls {
  account: string
  day: string
  calls: number
}

/**
 * Adds calls to the accounts' daily totals in Postgres, one statement per batch. Accounts that do not
 * exist (deleted since) are skipped rather than failing the batch.
 */
export async function persistDailyCalls(sql: Sql, rows: DailyCalls[]): Promise<void> {
  const merged = new Map<string, DailyCalls>()
  for (const r of rows) {
    if (r.calls <= 0) continue
    const k = `${r.day} ${r.account}`
    const m = merged.get(k)
    if (m) m.calls += r.calls
    else merged.set(k, { ...r })
  }
  if (merged.size === 0) return
  const list = [...merged.values()]
  await sql`insert into daily_validate_calls as d (account_id, day, calls)
    select u.account_id, u.day::date, u.calls
    from unnest(${list.map((r) => r.account)}::text[], ${list.map((r) => r.day)}::text[], ${list.map((r) => r.calls)}::bigint[])
      as u (account_id, day, calls)
    where exists (select 1 from accounts a where a.id = u.account_id)
    order by 1, 2
    on conflict (account_id, day) do update set calls = d.calls + excluded.calls`
}

/** The day's persisted totals, for `accounts` (all accounts with calls that day when omitted). */
export async function loadDailyCalls(sql: Sql, day: string, accounts?: string[]): Promise<Map<string, number>> {
  const rows = accounts
    ? await sql<{ account_id: string; calls: string }[]>`select account_id, calls::text from daily_validate_calls
        where day = ${day}::date and account_id = any (${accounts}::text[])`
    : await sql<{ account_id: string; calls: string }[]>`select account_id, calls::text from daily_validate_calls where day = ${day}::date`
  return new Map(rows.map((r) => [r.account_id, Number(r.calls)]))
}

export class MemoryCounters implements Counters {
  private clock = new UtcDayClock()
  private day = this.clock.at()
  private counts = new Map<string, number>()
  /** What Postgres already holds of `counts` (flushes add the difference). */
  private persisted = new Map<string, number>()
  /** A finished day's counts not yet in Postgres. */
  private ended: { day: string; counts: Map<string, number>; persisted: Map<string, number> }[] = []

  /** Without `sql` the counts live only as long as the process. */
  constructor(private readonly sql: Sql | null = null) {}

  /** Counters that start from today's totals in Postgres (a restarted node keeps the day's quota). */
  static async start(sql: Sql): Promise<MemoryCounters> {
    const c = new MemoryCounters(sql)
    c.counts = await loadDailyCalls(sql, c.day)
    c.persisted = new Map(c.counts)
    return c
  }

  private roll(now = Date.now()) {
    const d = this.clock.at(now)
    if (d !== this.day) {
      if (this.sql) this.ended.push({ day: this.day, counts: this.counts, persisted: this.persisted })
      this.day = d
      this.counts = new Map()
      this.persisted = new Map()
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

  private flushing: Promise<void> | null = null

  /** One flush at a time: two would both send the same difference. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => {})
    this.flushing = this.persist().finally(() => (this.flushing = null))
    return this.flushing
  }

  private async persist(): Promise<void> {
    if (!this.sql) return
    this.roll()
    const days = [...this.ended, { day: this.day, counts: this.counts, persisted: this.persisted }]
    const rows: DailyCalls[] = []
    for (const { day, counts, persisted } of days) {
      for (const [account, n] of counts) {
        const calls = n - (persisted.get(account) ?? 0)
        if (calls > 0) rows.push({ account, day, calls })
      }
    }
    await persistDailyCalls(this.sql, rows) // throws: nothing marked, the next flush sends it all again
    for (const r of rows) {
      const { persisted } = days.find((d) => d.day === r.day)!
      persisted.set(r.account, (persisted.get(r.account) ?? 0) + r.calls)
    }
    this.ended = []
  }

  state(): CounterState {
    return 'embedded'
  }

  async close(): Promise<void> {
    await this.flush().catch(() => {})
  }
}

// The cluster counters' Postgres side: calls stored in Redis are added to the day's total in Postgres
// (daily_validate_calls) after each Redis flush, one batch in flight at a time, and read back when a
// day's Redis keys must be created (Redis started empty). Without Postgres (some tests) it does nothing
// and every total reads 0.
import { loadDailyCalls, persistDailyCalls } from './counters'
import type { Sql } from './db'
import type { Logger } from './log'

/** What the replay needs of a counted day: its calls in Redis that Postgres does not hold yet. */
export interface Unpersisted {
  day: string
  account: string
  unpersisted: number
  /** Calls of this day in a batch in flight (a past day is kept until it is 0). */
  replaying: number
}

export class DailyCallsReplay {
  private inFlight: Promise<void> | null = null

  constructor(
    private readonly sql: Sql | null,
    private readonly log: Logger,
  ) {}

  /**
   * Adds the `unpersisted` calls of `days` to Postgres without waiting; on failure they are counted as
   * unpersisted again. Returns false when a batch is already in flight (nothing taken: try again later).
   */
  start(days: Unpersisted[]): boolean {
    if (!this.sql) return true
    if (this.inFlight) return false
    const sent = days.filter((d) => d.unpersisted > 0).map((d) => ({ d, calls: d.unpersisted }))
    if (sent.length === 0) return true
    for (const x of sent) (x.d.unpersisted -= x.calls), (x.d.replaying += x.calls)
    this.inFlight = persistDailyCalls(this.sql, sent.map(({ d, calls }) => ({ account: d.account, day: d.day, calls })))
      .catch((err) => {
        for (const x of sent) x.d.unpersisted += x.calls
        this.log.warn({ err: String(err) }, 'daily call totals not persisted; retrying at the next flush')
      })
      .finally(() => {
        for (const x of sent) x.d.replaying -= x.calls
        this.inFlight = null
      })
    return true
  }

  /** Resolves once no batch is in flight (its calls are then either in Postgres or unpersisted again). */
  async settled(): Promise<void> {
    while (this.inFlight) await this.inFlight
  }

  /** The days' totals in Postgres, by day then account (0 when absent); throws when Postgres fails. */
  async totals(days: { day: string; account: string }[]): Promise<(d: { day: string; account: string }) => number> {
    const byDay = new Map<string, Map<string, number>>()
    if (this.sql) {
      for (const day of new Set(days.map((d) => d.day))) {
        const accounts = [...new Set(days.filter((d) => d.day === day).map((d) => d.account))]
        byDay.set(day, await loadDailyCalls(this.sql, day, accounts))
      }
    }
    return (d) => byDay.get(d.day)?.get(d.account) ?? 0
  }
}

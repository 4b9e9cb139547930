// Validate answers by outcome, per account, product and UTC day (GET /v1/analytics/validations).
// The validate path adds one to a number in a small per-(account, product) array: two Map lookups on
// strings the hot state and the principal cache already interned (their hashes are cached), no I/O and
// no allocation once a pair has been seen. The node's flush job (every FLUSH_INTERVAL_MS) takes what
// was counted and adds it to Postgres in one upsert, so every node's counts meet there, exact up to
// one flush interval. A failed write keeps the counts for the next flush; a crash loses at most what
// was counted since the last flush.
import { VALIDATE_OUTCOMES, type ValidateOutcome } from '../../core/outcomes'
import { nextUtcMidnight, UtcDayClock } from '../../infra/counters'
import type { Sql } from '../../infra/db'

/** Index of each outcome in a counts array (a property read on the hot path, no string compare). */
export const OUTCOME = Object.freeze(Object.fromEntries(VALIDATE_OUTCOMES.map((o, i) => [o, i]))) as Readonly<Record<ValidateOutcome, number>>

/** The product of answers that belong to none (not_found, rate_limited). */
export const NO_PRODUCT = ''

/** A pair idle for this many flushes gives its memory back (it is allocated again on its next call). */
const IDLE_FLUSHES = 300

class Cell {
  readonly counts = VALIDATE_OUTCOMES.map(() => 0)
  any = false
  idle = 0
}

export interface ValidationRow {
  account: string
  product: string
  day: string
  counts: number[]
}

export class ValidationCounts {
  private clock = new UtcDayClock()
  private day: string
  /** Epoch ms at which the current day ends (a number compare per call; the clock formats once a day). */
  private dayEnds: number
  private accounts = new Map<string, Map<string, Cell>>()
  /** Counts of a day that ended, or of a failed write, waiting for the next flush. */
  private carried: ValidationRow[] = []
  private flushing: Promise<void> | null = null

  /** Without `sql` the counts are only kept in memory (taken by `take`). `now`: the clock at start. */
  constructor(
    private readonly sql: Sql | null,
    now = Date.now(),
  ) {
    this.day = this.clock.at(now)
    this.dayEnds = nextUtcMidnight(now)
  }

  /** One validate answer. `now`: the request's clock reading (the UTC day it counts on). */
  record(accountId: string, productId: string, outcome: number, now: number): void {
    if (now >= this.dayEnds) this.roll(now)
    let products = this.accounts.get(accountId)
    if (products === undefined) this.accounts.set(accountId, (products = new Map()))
    let cell = products.get(productId)
    if (cell === undefined) products.set(productId, (cell = new Cell()))
    cell.counts[outcome]!++
    cell.any = true
  }

  private roll(now: number) {
    const day = this.clock.at(now)
    if (day === this.day) return
    this.carried.push(...this.drain()) // yesterday's counts go to yesterday
    this.day = day
    this.dayEnds = nextUtcMidnight(now)
  }

  /** What was counted since the last drain (non-zero pairs), zeroing the cells. */
  private drain(): ValidationRow[] {
    const rows: ValidationRow[] = []
    for (const [account, products] of this.accounts) {
      for (const [product, cell] of products) {
        if (!cell.any) {
          if (++cell.idle >= IDLE_FLUSHES) products.delete(product)
          continue
        }
        rows.push({ account, product, day: this.day, counts: cell.counts.slice() })
        cell.counts.fill(0)
        cell.any = false
        cell.idle = 0
      }
      if (products.size === 0) this.accounts.delete(account)
    }
    return rows
  }

  /** Everything not yet written (and forgets it): for the flush, and for tests without Postgres. */
  take(now = Date.now()): ValidationRow[] {
    if (now >= this.dayEnds) this.roll(now)
    const rows = [...this.carried, ...this.drain()]
    this.carried = []
    return merge(rows)
  }

  /** Adds what was counted to Postgres. One flush at a time; a failed write is retried next time. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => {})
    this.flushing = this.write().finally(() => (this.flushing = null))
    return this.flushing
  }

  private async write(): Promise<void> {
    if (!this.sql) return
    const rows = this.take()
    if (rows.length === 0) return
    try {
      await persistValidations(this.sql, rows)
    } catch (err) {
      this.carried.push(...rows) // merged with later counts at the next flush
      throw err
    }
  }
}

/** One row per (account, product, day). */
function merge(rows: ValidationRow[]): ValidationRow[] {
  const merged = new Map<string, ValidationRow>()
  for (const r of rows) {
    const k = `${r.day} ${r.account} ${r.product}`
    const m = merged.get(k)
    if (!m) merged.set(k, { ...r, counts: r.counts.slice() })
    else for (let i = 0; i < m.counts.length; i++) m.counts[i]! += r.counts[i]!
  }
  return [...merged.values()]
}

/** Adds counts in one statement; rows of accounts deleted since are skipped, not an error. */
export async function persistValidations(sql: Sql, rows: ValidationRow[]): Promise<void> {
  // One column per outcome, named as the outcome (sql/021 and later files add them). The names are
  // the code's own constants (checked below), so they are written into the statement as they are.
  if (!VALIDATE_OUTCOMES.every((o) => /^[a-z_]+$/.test(o))) throw new Error('outcome names must be plain column names')
  const columns = sql.unsafe(VALIDATE_OUTCOMES.join(', '))
  const fromU = sql.unsafe(VALIDATE_OUTCOMES.map((o) => `u.${o}`).join(', '))
  const added = sql.unsafe(VALIDATE_OUTCOMES.map((o) => `${o} = d.${o} + excluded.${o}`).join(', '))
  const arrays = VALIDATE_OUTCOMES.map((o) => sql`, ${rows.map((r) => r.counts[OUTCOME[o]]!)}::bigint[]`)
  await sql`insert into analytics_daily_validations as d (account_id, day, product_id, ${columns})
    select u.account_id, u.day::date, u.product_id, ${fromU}
    from unnest(${rows.map((r) => r.account)}::text[], ${rows.map((r) => r.day)}::text[], ${rows.map((r) => r.product)}::text[]${arrays})
      as u (account_id, day, product_id, ${columns})
    where exists (select 1 from accounts a where a.id = u.account_id)
    order by 1, 2, 3
    on conflict (account_id, day, product_id) do update set ${added}`
}

// Retention (docs/operations.md, "Retention"): events, webhook deliveries and attempt logs older than RETENTION_DAYS are
// deleted by a background job, so a busy account does not grow them without bound.
// - Small batches, each its own short transaction: no long locks; rows a delivery worker holds are
//   skipped (SKIP LOCKED) and go on a later run.
// - One node at a time: every batch first takes a transaction-scoped advisory lock and stops the run
//   when another node holds it (no session lock to leak through a pool or a crashed node).
// - Pending deliveries are never deleted, nor the events and attempt logs they still need. Children go
//   before parents (the success log and the other attempts, then finished deliveries without attempts,
//   then events without deliveries), so no cascade ever deletes a row this job did not choose.
// - Analytics rollups (analytics_*) and daily call counts are kept: they are small and are the history.
import { drainBatches } from '../../infra/batches'
import type { Sql } from '../../infra/db'

const LOCK_ID = 7_202_613 // arbitrary, fixed: "keyward retention"
/** How often each node tries (the lock makes the other nodes' tries no-ops while one works). */
export const RETENTION_INTERVAL_MS = 10 * 60_000
const BATCH = 500
/** Bounds one run; what is left goes on the next run. */
const MAX_BATCHES = 200

export interface PruneResult {
  /** Rows of the success log (sql/032_webhook_successes.sql): each holds one logged batch's successes for one webhook. */
  successes: number
  attempts: number
  deliveries: number
  events: number
  /** Another node held the lock: this run did nothing. */
  busy: boolean
}

type Kind = 'successes' | 'attempts' | 'deliveries' | 'events'

export async function pruneExpired(
  sql: Sql,
  opts: { days: number; batch?: number; maxBatches?: number; now?: number },
): Promise<PruneResult> {
  const cutoff = new Date((opts.now ?? Date.now()) - opts.days * 86_400_000)
  const batch = opts.batch ?? BATCH
  const budget = { left: opts.maxBatches ?? MAX_BATCHES } // one bound for the whole run, over the four kinds
  const result: PruneResult = { successes: 0, attempts: 0, deliveries: 0, events: 0, busy: false }
  for (const kind of ['successes', 'attempts', 'deliveries', 'events'] as Kind[]) {
    const { handled, stopped } = await drainBatches(batch, () => pruneBatch(sql, kind, cutoff, batch), budget)
    result[kind] += handled
    if (stopped) return { ...result, busy: true }
  }
  return result
}

/** One batch of one kind in one transaction; null when another node holds the retention lock. */
async function pruneBatch(sql: Sql, kind: Kind, cutoff: Date, batch: number): Promise<number | null> {
  return sql.begin(async (tx) => {
    const [lock] = await tx<{ locked: boolean }[]>`select pg_try_advisory_xact_lock(${LOCK_ID}) as locked`
    if (!lock!.locked) return null
    if (kind === 'successes') {
      // Successes end their delivery, so no delivery in progress needs them.
      const r = await tx`delete from webhook_successes where id in (
          select id from webhook_successes where created_at < ${cutoff}
          order by created_at limit ${batch} for update skip locked)`
      return r.count
    }
    if (kind === 'attempts') {
      // A delivery still in progress keeps its whole history.
      const r = await tx`delete from webhook_attempts where id in (
          select a.id from webhook_attempts a
          where a.created_at < ${cutoff}
            and not exists (select 1 from webhook_deliveries d where d.id = a.delivery_id and d.status = 'pending')
          order by a.created_at limit ${batch} for update skip locked)`
      return r.count
    }
    if (kind === 'deliveries') {
      // Finished before the cutoff, and no attempt log left (a younger one keeps it).
      const r = await tx`delete from webhook_deliveries where id in (
          select d.id from webhook_deliveries d
          where d.status <> 'pending' and d.updated_at < ${cutoff}
            and not exists (select 1 from webhook_attempts a where a.delivery_id = d.id)
          order by d.updated_at limit ${batch} for update skip locked)`
      return r.count
    }
    // An event some delivery still refers to (pending, or finished recently) stays with it.
    const r = await tx`delete from events where id in (
        select e.id from events e
        where e.created_at < ${cutoff}
          and not exists (select 1 from webhook_deliveries d where d.event_id = e.id)
        order by e.created_at limit ${batch} for update skip locked)`
    return r.count
  })
}

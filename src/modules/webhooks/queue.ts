// The delivery queue in Postgres. Any number of nodes claim due rows with FOR UPDATE SKIP LOCKED, so
// no two nodes attempt the same delivery; a claimed row's next_attempt_at becomes its lease.
import { newId, open } from '../../infra/crypto'
import type { Sql, Tx } from '../../infra/db'
import { cancelPending } from './repo'
import type { AttemptOutcome } from './sender'
import { signEvent, type SignedMessage } from './signer'

export interface Job {
  deliveryId: string
  webhookId: string
  url: string
  eventType: string
  /** Attempts already made (the claim is attempt `attempts + 1`). */
  attempts: number
  message: SignedMessage
}

type ClaimRow = {
  id: string
  attempts: number
  webhook_id: string
  url: string
  secret_sealed: string
  is_active: boolean
  event_id: string
  type: string
  data: unknown
  actor_type: string
  actor_id: string | null
  created_at: Date
}

/**
 * Claims up to `limit` due deliveries and signs them, in one transaction holding their row locks.
 * Deleting a webhook deletes its delivery rows first (repo.deleteWebhook), so it waits for such a
 * claim: either the rows are gone before the claim, or they were signed while the webhook existed.
 * Only delivery rows are locked here, so this never waits on a webhook row (no lock-order deadlock
 * with deletes, PATCHes or 410 handling, which lock the webhook first).
 */
export async function claimDue(sql: Sql, secretKey: Uint8Array, limit: number, leaseMs: number): Promise<Job[]> {
  return sql.begin(async (tx) => {
    const rows = await tx<ClaimRow[]>`select d.id, d.attempts, d.webhook_id, w.url, w.secret_sealed, w.is_active,
        e.id as event_id, e.type, e.data, e.actor_type, e.actor_id, e.created_at
      from webhook_deliveries d
      join webhooks w on w.id = d.webhook_id
      join events e on e.id = d.event_id
      where d.status = 'pending' and d.next_attempt_at <= now()
      order by d.next_attempt_at, d.id
      limit ${limit}
      for update of d skip locked`
    if (rows.length === 0) return []
    // A webhook deactivated while its event was being written may still have a pending row: cancel it.
    const inactive = rows.filter((r) => !r.is_active).map((r) => r.id)
    const active = rows.filter((r) => r.is_active)
    if (inactive.length) {
      await tx`update webhook_deliveries set status = 'cancelled', updated_at = now() where id = any (${inactive}::bigint[])`
    }
    if (active.length === 0) return []
    await tx`update webhook_deliveries set next_attempt_at = now() + make_interval(secs => ${leaseMs / 1000}), updated_at = now()
      where id = any (${active.map((r) => r.id)}::bigint[])`
    const now = Date.now()
    const jobs: Job[] = []
    for (const r of active) {
      let secret: string
      try {
        secret = open(secretKey, r.secret_sealed).toString('utf8')
      } catch {
        // Sealed under another SECRET_KEY: it can never be signed, so fail it (logged) instead of
        // letting it block the queue.
        await failUnsignable(tx, r)
        continue
      }
      jobs.push({
        deliveryId: String(r.id),
        webhookId: r.webhook_id,
        url: r.url,
        eventType: r.type,
        attempts: r.attempts,
        message: signEvent(secret, { id: r.event_id, type: r.type, createdAt: r.created_at, actor: { type: r.actor_type, id: r.actor_id }, data: r.data }, now),
      })
    }
    return jobs
  })
}

async function failUnsignable(tx: Tx, r: ClaimRow): Promise<void> {
  await tx`update webhook_deliveries set status = 'failed', attempts = attempts + 1, updated_at = now() where id = ${r.id}`
  await tx`insert into webhook_attempts
      (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
    select ${newId('whd')}, webhook_id, id, account_id, event_id, ${r.type}, attempts, null, false, 0,
           'not sent: the webhook secret cannot be decrypted with the configured SECRET_KEY'
    from webhook_deliveries where id = ${r.id}`
}

export type Verdict =
  | { kind: 'succeeded' }
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed' }
  /** 410 Gone: the webhook is disabled and its other pending deliveries cancelled. */
  | { kind: 'gone' }

export interface AttemptRecord {
  job: Job
  outcome: AttemptOutcome
  verdict: Verdict
}

/**
 * Logs the attempt and moves the delivery on. Guarded by the attempt count seen at claim time: if
 * another node took over (its lease ran out) and logged first, this result is dropped. Returns false
 * when nothing was recorded (delivery deleted with its webhook, or taken over).
 */
export async function recordAttempt(sql: Sql, rec: AttemptRecord): Promise<boolean> {
  if (rec.verdict.kind !== 'gone') return (await logAttempts(sql, [rec])).size > 0
  return sql.begin(async (tx) => {
    // webhook row first, then delivery rows: the same lock order as PATCH and DELETE
    await tx`update webhooks set is_active = false, updated_at = now() where id = ${rec.job.webhookId}`
    const recorded = (await logAttempts(tx, [rec])).size > 0
    await cancelPending(tx, rec.job.webhookId)
    return recorded
  })
}

/**
 * Logs many attempts (none of them 410s) in one statement: under load the worker batches whatever
 * finished while the previous batch was being written. Returns the delivery ids that were recorded.
 */
export async function logAttempts(sql: Sql | Tx, recs: AttemptRecord[]): Promise<Set<string>> {
  const status = recs.map(({ verdict: v }) => (v.kind === 'retry' ? 'pending' : v.kind === 'succeeded' ? 'succeeded' : 'failed'))
  // A delivery cancelled meanwhile (its webhook was disabled) stays cancelled unless this attempt succeeded.
  // Every column travels as text[] (postgres.js guesses array types from their first element) and is
  // cast back here.
  const text = (values: (string | number | boolean | null)[]) => values.map((v) => (v === null ? null : String(v)))
  const rows = await sql<{ delivery_id: string }[]>`with input as (
      select delivery_id::bigint, prev::int, status, delay_secs::float8, attempt_id, event_type, status_code::int,
             success::bool, duration_ms::int, error
      from unnest(
        ${text(recs.map((r) => r.job.deliveryId))}::text[], ${text(recs.map((r) => r.job.attempts))}::text[], ${status}::text[],
        ${text(recs.map((r) => (r.verdict.kind === 'retry' ? r.verdict.delayMs / 1000 : 0)))}::text[],
        ${recs.map(() => newId('whd'))}::text[], ${recs.map((r) => r.job.eventType)}::text[],
        ${text(recs.map((r) => r.outcome.statusCode))}::text[], ${text(recs.map((r) => r.outcome.success))}::text[],
        ${text(recs.map((r) => r.outcome.durationMs))}::text[], ${text(recs.map((r) => r.outcome.error))}::text[]
      ) as t(delivery_id, prev, status, delay_secs, attempt_id, event_type, status_code, success, duration_ms, error)
    ), locked as (
      -- rows locked in id order, like cancelPending: concurrent multi-row writes cannot deadlock
      select id from webhook_deliveries where id in (select delivery_id from input) order by id for update
    ), d as (
      update webhook_deliveries w set
        status = case when w.status = 'cancelled' and i.status <> 'succeeded' then 'cancelled' else i.status end,
        attempts = i.prev + 1,
        next_attempt_at = case when i.status = 'pending' then now() + make_interval(secs => i.delay_secs) else w.next_attempt_at end,
        updated_at = now()
      from input i, locked l
      where l.id = i.delivery_id and w.id = l.id and w.attempts = i.prev
      returning w.id, w.webhook_id, w.account_id, w.event_id
    )
    insert into webhook_attempts
      (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
    select i.attempt_id, d.webhook_id, d.id, d.account_id, d.event_id, i.event_type, i.prev + 1, i.status_code, i.success,
           i.duration_ms, i.error
    from d join input i on i.delivery_id = d.id
    returning delivery_id`
  return new Set(rows.map((r) => String(r.delivery_id)))
}

/** Makes claimed-but-unattempted deliveries due again at once (a node shutting down mid-attempt). */
export async function releaseClaims(sql: Sql, jobs: Job[]): Promise<void> {
  if (jobs.length === 0) return
  const ids = jobs.map((j) => j.deliveryId)
  const attempts = jobs.map((j) => String(j.attempts))
  await sql`update webhook_deliveries w set next_attempt_at = now(), updated_at = now()
    from unnest(${ids}::text[], ${attempts}::text[]) as j(id, attempts)
    where w.id = j.id::bigint and w.attempts = j.attempts::int and w.status = 'pending'`
}

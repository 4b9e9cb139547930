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
  created_at: Date
}

/**
 * Claims up to `limit` due deliveries and signs them, in one transaction. The webhook rows are held
 * FOR KEY SHARE meanwhile, so a concurrent DELETE of a webhook waits for the claim: either its
 * deliveries are gone before the claim, or they were signed while it still existed.
 */
export async function claimDue(sql: Sql, secretKey: Uint8Array, limit: number, leaseMs: number): Promise<Job[]> {
  return sql.begin(async (tx) => {
    const rows = await tx<ClaimRow[]>`select d.id, d.attempts, d.webhook_id, w.url, w.secret_sealed, w.is_active,
        e.id as event_id, e.type, e.data, e.created_at
      from webhook_deliveries d
      join webhooks w on w.id = d.webhook_id
      join events e on e.id = d.event_id
      where d.status = 'pending' and d.next_attempt_at <= now()
      order by d.next_attempt_at, d.id
      limit ${limit}
      for update of d skip locked
      for key share of w`
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
        message: signEvent(secret, { id: r.event_id, type: r.type, createdAt: r.created_at, data: r.data }, now),
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

/**
 * Logs the attempt and moves the delivery on, in one statement. Guarded by the attempt count seen at
 * claim time: if another node took over (lease ran out) and logged first, this result is dropped.
 * Returns false when nothing was recorded (delivery deleted with its webhook, or taken over).
 */
export async function recordAttempt(sql: Sql, job: Job, outcome: AttemptOutcome, verdict: Verdict): Promise<boolean> {
  if (verdict.kind !== 'gone') return logAttempt(sql, job, outcome, verdict)
  return sql.begin(async (tx) => {
    if (!(await logAttempt(tx, job, outcome, verdict))) return false
    await tx`update webhooks set is_active = false, updated_at = now() where id = ${job.webhookId}`
    await cancelPending(tx, job.webhookId)
    return true
  })
}

async function logAttempt(sql: Sql | Tx, job: Job, outcome: AttemptOutcome, verdict: Verdict): Promise<boolean> {
  const attempt = job.attempts + 1
  const status = verdict.kind === 'retry' ? 'pending' : verdict.kind === 'succeeded' ? 'succeeded' : 'failed'
  const delaySecs = verdict.kind === 'retry' ? verdict.delayMs / 1000 : 0
  // A delivery cancelled meanwhile (its webhook was disabled) stays cancelled unless this attempt succeeded.
  const rows = await sql`with d as (
      update webhook_deliveries set
        status = case when status = 'cancelled' and ${status}::text <> 'succeeded' then 'cancelled' else ${status}::text end,
        attempts = ${attempt},
        next_attempt_at = case when ${status}::text = 'pending' then now() + make_interval(secs => ${delaySecs}) else next_attempt_at end,
        updated_at = now()
      where id = ${job.deliveryId} and attempts = ${job.attempts}
      returning id, webhook_id, account_id, event_id
    )
    insert into webhook_attempts
      (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
    select ${newId('whd')}, d.webhook_id, d.id, d.account_id, d.event_id, ${job.eventType}, ${attempt}, ${outcome.statusCode},
           ${outcome.success}, ${outcome.durationMs}, ${outcome.error}
    from d returning 1`
  return rows.length > 0
}

/** Makes claimed-but-unattempted deliveries due again at once (a node shutting down mid-attempt). */
export async function releaseClaims(sql: Sql, jobs: Job[]): Promise<void> {
  for (const job of jobs) {
    await sql`update webhook_deliveries set next_attempt_at = now(), updated_at = now()
      where id = ${job.deliveryId} and attempts = ${job.attempts} and status = 'pending'`
  }
}

// The delivery queue in Postgres. Any number of nodes claim due rows with FOR UPDATE SKIP LOCKED, so
// no two nodes attempt the same delivery; a row's claim ends at its `leased_until` (the column keeps
// its older name: docs/decisions.md, Webhooks). One statement claims a batch, one statement logs a
// batch of results: no round trip per attempt.
import { newId, open } from '../../infra/crypto'
import type { Sql, Tx } from '../../infra/db'
import { cancelPending } from './repo'
import type { AttemptOutcome } from './sender'
import type { OwnDelivery } from '../events/outbox'
import { secretBytes, signEvent, type SignedMessage, type WebhookEvent } from './signer'

export interface Job {
  deliveryId: string
  webhookId: string
  url: string
  /** Attempts already made (the claim is attempt `attempts + 1`). */
  attempts: number
  event: WebhookEvent
  /** The webhook's signing key (the bytes of its secret). */
  key: Uint8Array
}

/** The job's message, signed now: `webhook-timestamp` is the time of the attempt, not of the claim. */
export const messageOf = (job: Job, now = Date.now()): SignedMessage => signEvent(job.key, job.event, now)

/**
 * Opens sealed webhook secrets into signing keys, each once (a burst for one endpoint shares it); null
 * for one sealed under another SECRET_KEY, which can never be signed.
 */
function keyOpener(secretKey: Uint8Array): (sealed: string) => Uint8Array | null {
  const keys = new Map<string, Uint8Array | null>()
  return (sealed) => {
    let key = keys.get(sealed)
    if (key === undefined) {
      try {
        key = secretBytes(open(secretKey, sealed).toString('utf8'))
      } catch {
        key = null
      }
      keys.set(sealed, key)
    }
    return key
  }
}

/** A claimed (or taken) delivery as releaseClaims needs it: which row, at which attempt count. */
export type Claim = Pick<Job, 'deliveryId' | 'attempts'>

/**
 * Jobs for the deliveries a node's own transaction wrote already taken (outbox.ts emitMany): no claim.
 * Those whose secret cannot be opened are returned apart, to be released to the claim, which fails them.
 */
export function ownJobs(secretKey: Uint8Array, own: OwnDelivery[]): { jobs: Job[]; unsignable: Claim[] } {
  const keyOf = keyOpener(secretKey)
  const jobs: Job[] = []
  const unsignable: Claim[] = []
  for (const d of own) {
    const key = keyOf(d.secretSealed)
    if (key === null) unsignable.push({ deliveryId: d.deliveryId, attempts: 0 })
    else jobs.push({ deliveryId: d.deliveryId, webhookId: d.webhookId, url: d.url, attempts: 0, event: d.event, key })
  }
  return { jobs, unsignable }
}

type ClaimRow = {
  id: string
  attempts: number
  webhook_id: string
  url: string
  secret_sealed: string
  event_id: string
  type: string
  data: unknown
  actor_type: string
  actor_id: string | null
  created_at: Date
}

/**
 * Claims up to `limit` due deliveries in one statement (one round trip, no explicit transaction): the
 * due rows are locked with FOR UPDATE SKIP LOCKED, so concurrent claims (this node's or others') never
 * take the same row; those of an active webhook are claimed (`leased_until` = now + `claimMs`) and come
 * back with what signing needs, those of a webhook deactivated while its event was being written are
 * cancelled. Deleting a webhook deletes its delivery rows first (repo.deleteWebhook), so it waits for
 * this statement: either the rows are gone before the claim, or they were claimed while the webhook
 * existed. Only delivery rows are locked (the webhook and event rows are only read), so this never
 * waits on a webhook row: no lock-order deadlock with deletes, PATCHes or 410 handling, which lock the
 * webhook first. The claim changes no indexed column, so Postgres writes it in place (a HOT update; see
 * sql/031_webhook_lease.sql).
 *
 * The claim is committed without waiting for its WAL flush (`synchronous_commit = off` for this statement
 * only): the flush is most of a small write's latency (measured p50 3.2 → 0.4 ms on the development
 * machine). Losing a claim costs a repeated attempt, and only if Postgres itself crashes within the
 * flush delay (a fraction of a second), which already repeats the attempts whose results it lost;
 * results (logAttempts) are committed durably, and a durable result makes its earlier claim durable.
 */
export async function claimDue(sql: Sql | Tx, secretKey: Uint8Array, limit: number, claimMs: number): Promise<Job[]> {
  // The statement lives in a function (sql/030_webhook_claim.sql) so that it is always planned as an
  // index scan in due order, whatever the table's statistics say (see there).
  const rows = await sql<ClaimRow[]>`select * from webhook_claim_due(${limit}::int, ${claimMs / 1000}::float8)`
  if (rows.length === 0) return []
  const jobs: Job[] = []
  const keyOf = keyOpener(secretKey)
  for (const r of rows) {
    const key = keyOf(r.secret_sealed)
    if (key === null) {
      // Sealed under another SECRET_KEY: it can never be signed, so fail it (logged) instead of
      // letting it block the queue. Rare, so one statement per row is fine; the claim keeps it ours.
      await failUnsignable(sql, r)
      continue
    }
    jobs.push({
      deliveryId: String(r.id),
      webhookId: r.webhook_id,
      url: r.url,
      attempts: r.attempts,
      event: { id: r.event_id, type: r.type, createdAt: r.created_at, actor: { type: r.actor_type, id: r.actor_id }, data: r.data },
      key,
    })
  }
  return jobs
}

async function failUnsignable(sql: Sql | Tx, r: ClaimRow): Promise<void> {
  await sql`with d as (
      update webhook_deliveries set status = 'failed', attempts = attempts + 1, leased_until = null, updated_at = now()
      where id = ${r.id} and status = 'pending' and attempts = ${r.attempts}
      returning id, webhook_id, account_id, event_id, attempts
    )
    insert into webhook_attempts
      (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
    select ${newId('whd')}, webhook_id, id, account_id, event_id, ${r.type}, attempts, null, false, 0,
           'not sent: the webhook secret cannot be decrypted with the configured SECRET_KEY'
    from d`
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
 * another node took over (its claim ran out) and logged first, this result is dropped. Returns false
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
 * A delivery that succeeded is deleted (its attempt log is its record; a delete is Postgres's cheapest
 * write, see sql/031_webhook_lease.sql); one to be retried becomes due after its delay, one that failed
 * for good stays as a failed row. Either way its claim is lifted.
 */
export async function logAttempts(sql: Sql | Tx, recs: AttemptRecord[]): Promise<Set<string>> {
  // The batch travels as one JSON text (native JSON.stringify; postgres.js serializes arrays element by
  // element, which cost more than the rest of an attempt's bookkeeping).
  const input = JSON.stringify(
    recs.map(({ job, outcome, verdict: v }) => ({
      delivery_id: job.deliveryId,
      prev: job.attempts,
      status: v.kind === 'retry' ? 'pending' : v.kind === 'succeeded' ? 'succeeded' : 'failed',
      delay_secs: v.kind === 'retry' ? v.delayMs / 1000 : 0,
      attempt_id: newId('whd'),
      event_type: job.event.type,
      status_code: outcome.statusCode,
      success: outcome.success,
      duration_ms: outcome.durationMs,
      // Postgres text cannot hold NUL, which a receiver's body may: a NUL would fail the whole batch and
      // leave these deliveries unlogged (retried at each claim's end instead of on the schedule).
      error: outcome.error === null ? null : outcome.error.replaceAll('\u0000', '\ufffd'),
    })),
  )
  // The statement lives in a function (sql/031_webhook_lease.sql) so that each result finds its row by
  // primary key whatever the table's statistics say. It is guarded by the attempt count seen at claim
  // time: a result for a delivery another node took over and logged first is dropped.
  const rows = await sql<{ delivery_id: string }[]>`select delivery_id from webhook_log_attempts(${input}::text)`
  return new Set(rows.map((r) => String(r.delivery_id)))
}

/**
 * Makes claimed-but-unattempted deliveries due again at once (a node shutting down mid-attempt). A
 * delivery its node took at its write (ownJobs) is due when its claim would end: that moves to now.
 */
export async function releaseClaims(sql: Sql, jobs: readonly Claim[]): Promise<void> {
  if (jobs.length === 0) return
  const ids = jobs.map((j) => j.deliveryId)
  const attempts = jobs.map((j) => String(j.attempts))
  await sql`update webhook_deliveries w set leased_until = null, next_attempt_at = least(w.next_attempt_at, now())
    from unnest(${ids}::text[], ${attempts}::text[]) as j(id, attempts)
    where w.id = j.id::bigint and w.attempts = j.attempts::int and w.status = 'pending'`
}

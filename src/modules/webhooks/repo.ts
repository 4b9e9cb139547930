// Webhook endpoints and the attempt log. The delivery queue itself is in queue.ts.
import type { Sql, Tx } from '../../infra/db'
import { iso, isoDates, type Dated } from '../../core/values'
import type { EventType } from '../events/outbox'
import type { DeliveryAttempt, Webhook } from './model'

type Row = Dated<Webhook, 'created_at' | 'updated_at'>

const toWebhook = (r: Row): Webhook => isoDates(r, ['created_at', 'updated_at'])

const columns = (sql: Sql | Tx) => sql`id, url, events, is_active, created_at, updated_at`

export async function countWebhooks(tx: Tx, accountId: string): Promise<number> {
  const [{ n }] = await tx<{ n: number }[]>`select count(*)::int as n from webhooks where account_id = ${accountId}`
  return n
}

export async function insertWebhook(
  tx: Tx,
  w: { id: string; accountId: string; url: string; events: EventType[]; secretSealed: string },
): Promise<Webhook> {
  const [row] = await tx<Row[]>`insert into webhooks (id, account_id, url, events, secret_sealed)
    values (${w.id}, ${w.accountId}, ${w.url}, ${w.events}, ${w.secretSealed}) returning ${columns(tx)}`
  return toWebhook(row)
}

export async function listWebhooks(sql: Sql, accountId: string): Promise<Webhook[]> {
  const rows = await sql<Row[]>`select ${columns(sql)} from webhooks where account_id = ${accountId} order by created_at, id`
  return rows.map(toWebhook)
}

export async function findWebhook(sql: Sql | Tx, accountId: string, id: string): Promise<Webhook | null> {
  const [row] = await sql<Row[]>`select ${columns(sql)} from webhooks where id = ${id} and account_id = ${accountId}`
  return row ? toWebhook(row) : null
}

/** The sealed secret, for signing a test send. */
export async function findSecret(sql: Sql, accountId: string, id: string): Promise<{ url: string; sealed: string } | null> {
  const [row] = await sql<{ url: string; secret_sealed: string }[]>`select url, secret_sealed from webhooks
    where id = ${id} and account_id = ${accountId}`
  return row ? { url: row.url, sealed: row.secret_sealed } : null
}

export async function updateWebhook(
  tx: Tx,
  accountId: string,
  id: string,
  patch: { url?: string; events?: EventType[]; isActive?: boolean },
): Promise<{ webhook: Webhook; wasActive: boolean } | null> {
  // NO KEY UPDATE, not UPDATE: attempt logs insert rows referencing this webhook (a KEY SHARE lock)
  // while holding delivery rows that cancelPending below waits for; FOR UPDATE would deadlock them.
  const [before] = await tx<{ is_active: boolean }[]>`select is_active from webhooks
    where id = ${id} and account_id = ${accountId} for no key update`
  if (!before) return null
  const [row] = await tx<Row[]>`update webhooks set
      url = coalesce(${patch.url ?? null}, url),
      events = coalesce(${patch.events ?? null}::text[], events),
      is_active = coalesce(${patch.isActive ?? null}::boolean, is_active),
      updated_at = now()
    where id = ${id} returning ${columns(tx)}`
  return { webhook: toWebhook(row), wasActive: before.is_active }
}

/**
 * An inactive webhook receives nothing: its pending deliveries are cancelled (re-activating it does not
 * bring them back). Called when a webhook is disabled by PATCH or by a 410 answer.
 */
export async function cancelPending(tx: Tx, webhookId: string): Promise<void> {
  // rows locked in id order, like the attempt log's batches: concurrent multi-row writes cannot deadlock
  await tx`update webhook_deliveries set status = 'cancelled', updated_at = now()
    where id in (select id from webhook_deliveries where webhook_id = ${webhookId} and status = 'pending' order by id for update)`
}

/**
 * Deletes the webhook with its queue and log: nothing is claimed (so signed) with its secret afterwards.
 * The delivery rows go first, so a claim reading the secret and leasing some of them right now is
 * waited for (queue.claimDue); rows an event adds meanwhile go with the webhook row (cascade).
 */
/** `deleted` runs in the delete's transaction with the webhook as it was (its event). */
export async function deleteWebhook(sql: Sql, accountId: string, id: string, deleted?: (tx: Tx, webhook: Webhook) => Promise<unknown>): Promise<boolean> {
  return sql.begin(async (tx) => {
    await tx`delete from webhook_deliveries where id in (select id from webhook_deliveries
      where webhook_id = ${id} and account_id = ${accountId} order by id for update)`
    const [row] = await tx<Row[]>`delete from webhooks where id = ${id} and account_id = ${accountId} returning ${columns(tx)}`
    if (row && deleted) await deleted(tx, toWebhook(row))
    return !!row
  })
}

type AttemptRow = {
  id: string
  event_id: string
  event_type: string
  attempt: number
  status_code: number | null
  success: boolean
  duration_ms: number
  error: string | null
  created_at: Date
}

export const toAttempt = (r: AttemptRow): DeliveryAttempt => ({
  id: r.id,
  event_id: r.event_id,
  event_type: r.event_type,
  attempt: r.attempt,
  status_code: r.status_code,
  success: r.success,
  duration_ms: r.duration_ms,
  error: r.error,
  created_at: iso(r.created_at)!,
})

export const attemptColumns = (sql: Sql | Tx) =>
  sql`id, event_id, event_type, attempt, status_code, success, duration_ms, error, created_at`

/**
 * The webhook's last `limit` attempts, newest first. Successes are stored one row per logged batch
 * (sql/032_webhook_successes.sql), so only the newest of those rows whose attempts the answer needs are
 * opened (their counts are read first, from the index's rows, without the attempts themselves).
 */
export async function recentAttempts(sql: Sql, webhookId: string, limit = 20): Promise<DeliveryAttempt[]> {
  const rows = await sql<AttemptRow[]>`with heads as (
      select id, n, created_at from webhook_successes
      where webhook_id = ${webhookId} order by created_at desc, id desc limit ${limit}
    ), needed as (
      select id from (select id, sum(n) over (order by created_at desc, id desc) - n as before from heads) h
      where before < ${limit}
    )
    (select ${attemptColumns(sql)} from webhook_attempts
      where webhook_id = ${webhookId} order by created_at desc, id desc limit ${limit})
    union all
    (select a->>0, a->>2, a->>3, (a->>4)::int, (a->>5)::int, true, (a->>6)::int, null, s.created_at
      from webhook_successes s join needed using (id), jsonb_array_elements(s.attempts) a)
    order by created_at desc, id desc limit ${limit}`
  return rows.map(toAttempt)
}

/** Logs a send that is not part of the queue (POST /v1/webhooks/:id/test). Null if the webhook is gone. */
export async function insertTestAttempt(
  sql: Sql,
  a: Omit<DeliveryAttempt, 'created_at'> & { webhookId: string; accountId: string },
): Promise<DeliveryAttempt | null> {
  const [row] = await sql<AttemptRow[]>`insert into webhook_attempts
      (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
    select ${a.id}, w.id, null, w.account_id, ${a.event_id}, ${a.event_type}, ${a.attempt}, ${a.status_code}, ${a.success},
           ${a.duration_ms}, ${a.error}
    from webhooks w where w.id = ${a.webhookId} and w.account_id = ${a.accountId}
    returning ${attemptColumns(sql)}`
  return row ? toAttempt(row) : null
}

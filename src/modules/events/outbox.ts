// The outbox: every state change calls `emit` inside its own transaction, so a change is never
// committed without its event. Delivery (webhooks) reads these rows later.
import type { Tx } from '../../infra/db'
import { newId } from '../../infra/crypto'

export const EVENT_TYPES = [
  'key.created',
  'key.revoked',
  'key.expired',
  'key.extended',
  'key.updated',
  'activation.created',
  'activation.deactivated',
  'product.created',
  'account.plan_changed',
  'api_key.created',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

/** Postgres NOTIFY channel that wakes the webhook delivery workers of every node at commit. */
export const WEBHOOK_WAKE_CHANNEL = 'keyward_webhooks'

/**
 * Writes the event and, in the same statement, one webhook delivery per active webhook of the account
 * subscribed to `type` (those existing now). When there is one, `pg_notify` wakes the delivery workers;
 * Postgres sends it only at commit, so a rolled-back change delivers nothing.
 */
export async function emit(tx: Tx, accountId: string, type: EventType, data: unknown): Promise<string> {
  const id = newId('evt')
  await tx`with ev as (
      insert into events (id, account_id, type, data) values (${id}, ${accountId}, ${type}, ${tx.json(data as never)})
      returning id
    ), fan as (
      insert into webhook_deliveries (webhook_id, event_id, account_id)
      select w.id, ev.id, w.account_id from webhooks w, ev
      where w.account_id = ${accountId} and w.is_active and ${type} = any (w.events)
      returning 1
    )
    select pg_notify(${WEBHOOK_WAKE_CHANNEL}, '') from (select 1) one where exists (select 1 from fan)`
  return id
}

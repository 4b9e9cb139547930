// The outbox: every state change calls `emit` inside its own transaction, so a change is never
// committed without its event. Delivery (webhooks) reads these rows later.
import type { Tx } from '../../infra/db'
import { newId } from '../../infra/crypto'
import type { Principal } from '../../core/principal'
import { ACTOR_TYPES, EVENT_TYPES, type ActorType, type EventType } from '../../core/events'

// The vocabulary lives in core (the console's bundle shares it); re-exported for the modules.
export { ACTOR_TYPES, EVENT_TYPES, type EventType }

/**
 * Who made a change: the API key (`ak_` id) that called the API, the operator (ADMIN_TOKEN), a device
 * (validate, deactivate), the system (expiry, inactivity release) or a payment connector (its con_ id).
 * Only an API key and a connector have an id.
 */
export interface Actor {
  type: ActorType
  id: string | null
}
export const OPERATOR: Actor = Object.freeze({ type: 'operator', id: null })
export const DEVICE: Actor = Object.freeze({ type: 'device', id: null })
export const SYSTEM: Actor = Object.freeze({ type: 'system', id: null })
/** A payment connector (con_ id) acting on its provider's webhook. */
export const byConnector = (connectorId: string): Actor => ({ type: 'connector', id: connectorId })
/** The API key behind a request. */
export const byApiKey = (who: Principal): Actor => ({ type: 'api_key', id: who.apiKeyId })

/**
 * The objects an event is about, for `GET /v1/events?resource_id=`: the object itself (`data.id`), an
 * activation event's activation and key, and a plan change's account.
 */
export function resourceIdsOf(data: unknown): string[] {
  const d = data as { id?: unknown; key_id?: unknown; account_id?: unknown; activation?: { id?: unknown } } | null
  if (d === null || typeof d !== 'object') return []
  const ids = [d.id, d.activation?.id, d.key_id, d.account_id].filter((v): v is string => typeof v === 'string')
  return [...new Set(ids)]
}

/** Postgres NOTIFY channel that wakes the webhook delivery workers of every node at commit. */
export const WEBHOOK_WAKE_CHANNEL = 'keyward_webhooks'

/**
 * Writes the event and, in the same statement, one webhook delivery per active webhook of the account
 * subscribed to `type` (those existing now). When there is one, `pg_notify` wakes the delivery workers;
 * Postgres sends it only at commit, so a rolled-back change delivers nothing.
 */
export async function emit(tx: Tx, accountId: string, type: EventType, data: unknown, actor: Actor): Promise<string> {
  const [id] = await emitMany(tx, [{ accountId, type, data, actor }])
  return id!
}

/** One event of `emitMany`. */
export interface PendingEvent {
  accountId: string
  type: EventType
  data: unknown
  actor: Actor
}

/**
 * Writes events (in input order: `seq` follows it) and their webhook deliveries in one statement (see
 * `emit`): the inactivity release's batches take one round trip instead of one per event (measured
 * ≈10× faster for a batch of 500).
 */
export async function emitMany(tx: Tx, events: readonly PendingEvent[]): Promise<string[]> {
  if (events.length === 0) return []
  const ids = events.map(() => newId('evt'))
  const rows = events.map((e, i) => ({
    id: ids[i],
    account_id: e.accountId,
    type: e.type,
    data: e.data,
    actor_type: e.actor.type,
    actor_id: e.actor.id,
    resource_ids: resourceIdsOf(e.data),
  }))
  await tx`with input as (
      select e->>'id' as id, e->>'account_id' as account_id, e->>'type' as type, e->'data' as data,
        e->>'actor_type' as actor_type, e->>'actor_id' as actor_id,
        array(select jsonb_array_elements_text(e->'resource_ids')) as resource_ids, n
      from jsonb_array_elements(${tx.json(rows as never)}) with ordinality as t(e, n)
    ), ev as (
      insert into events (id, account_id, type, data, actor_type, actor_id, resource_ids)
      select id, account_id, type, data, actor_type, actor_id, resource_ids from input order by n
      returning id, account_id, type
    ), fan as (
      insert into webhook_deliveries (webhook_id, event_id, account_id)
      select w.id, ev.id, w.account_id from ev join webhooks w
        on w.account_id = ev.account_id and w.is_active and ev.type = any (w.events)
      returning 1
    )
    select pg_notify(${WEBHOOK_WAKE_CHANNEL}, '') from (select 1) one where exists (select 1 from fan)`
  return ids
}

// The outbox: every state change calls `emit` inside its own transaction, so a change is never
// committed without its event. Delivery (webhooks) reads these rows later.
import { afterCommit, poolOf, type Sql, type Tx } from '../../infra/db'
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
 * activation event's activation and key, a plan change's account, and a signing key's kid.
 */
export function resourceIdsOf(data: unknown): string[] {
  const d = data as { id?: unknown; kid?: unknown; key_id?: unknown; account_id?: unknown; activation?: { id?: unknown } } | null
  if (d === null || typeof d !== 'object') return []
  const ids = [d.id, d.kid, d.activation?.id, d.key_id, d.account_id].filter((v): v is string => typeof v === 'string')
  return [...new Set(ids)]
}

/** Postgres NOTIFY channel that wakes the webhook delivery workers of every node at commit. */
export const WEBHOOK_WAKE_CHANNEL = 'keyward_webhooks'

/** A delivery written by a node's own transaction and taken by that node's worker without a claim. */
export interface OwnDelivery {
  deliveryId: string
  webhookId: string
  url: string
  secretSealed: string
  event: { id: string; type: EventType; createdAt: Date; actor: Actor; data: unknown }
}

/**
 * A node's delivery worker, offered the deliveries its node's own transactions write, so that it need
 * not claim them back from Postgres (see emitMany). `reserve` says how many it can take now and holds
 * that room; `release` gives back what a statement did not use; `settle` hands over what was taken once
 * the transaction has ended (dropped when it did not commit), with the room it held. `at` is when the
 * statement was sent (performance.now()): its claim, `claimMs`, runs from a moment after that.
 */
export interface DeliveryTaker {
  readonly claimMs: number
  reserve(): number
  release(n: number): void
  settle(held: number, own: OwnDelivery[], committed: boolean, at: number): void
}

/** Per pool, the workers offered its transactions' deliveries (one per node; tests run more on one pool). */
const takers = new WeakMap<Sql, DeliveryTaker[]>()

/** Offers `taker` the deliveries written by transactions of `pool` (a node's Db sql). Returns the undo. */
export function offerOwnDeliveries(pool: Sql, taker: DeliveryTaker): () => void {
  const list = takers.get(pool) ?? []
  takers.set(pool, [...list, taker])
  return () => takers.set(pool, (takers.get(pool) ?? []).filter((t) => t !== taker))
}

/** The first worker offered `tx`'s deliveries that has room for some, with the room it holds for them. */
function reserveFor(tx: Tx): { taker: DeliveryTaker; held: number } | null {
  const pool = poolOf(tx)
  for (const taker of (pool && takers.get(pool)) || []) {
    const held = taker.reserve()
    if (held > 0) return { taker, held }
  }
  return null
}

/**
 * Writes the event and, in the same statement, one webhook delivery per active webhook of the account
 * subscribed to `type` (those existing now). The node's worker takes what it has room for (emitMany);
 * for any left to claim, `pg_notify` wakes the delivery workers. Both happen only at commit, so a
 * rolled-back change delivers nothing.
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
 *
 * The node's own deliveries. When `tx` was begun by a node whose delivery worker has room (a
 * DeliveryTaker), up to that many of the new deliveries are written already taken: due only when a
 * claim would end (`next_attempt_at` = the statement's time + the claim), and handed to the worker with
 * everything signing needs once the transaction commits. The worker sends them at once, with no claim
 * statement (the claim was a third of Postgres's work per delivery). Should the node die first, they are
 * due when the claim ends, for any node, as a claimed delivery would be. The rest are due now, and
 * NOTIFY wakes every node's worker to claim them.
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
  const at = performance.now()
  const reserved = reserveFor(tx) // only for a transaction the Db tracks, so afterCommit takes its hooks
  const taker = reserved?.taker
  let held = reserved?.held ?? 0
  let own: OwnDelivery[] = []
  if (taker) afterCommit(tx, () => taker.settle(held, own, true, at), () => taker.settle(held, own, false, at))
  const claimSecs = taker ? taker.claimMs / 1000 : 0
  const [result] = await tx<{ taken: [string, string, string, string, string, unknown][]; created_at: Date }[]>`with input as (
      select e->>'id' as id, e->>'account_id' as account_id, e->>'type' as type, e->'data' as data,
        e->>'actor_type' as actor_type, e->>'actor_id' as actor_id,
        array(select jsonb_array_elements_text(e->'resource_ids')) as resource_ids, n
      from jsonb_array_elements(${tx.json(rows as never)}) with ordinality as t(e, n)
    ), ev as (
      insert into events (id, account_id, type, data, actor_type, actor_id, resource_ids)
      select id, account_id, type, data, actor_type, actor_id, resource_ids from input order by n
      returning id, account_id, type, data
    ), fan as (
      insert into webhook_deliveries (webhook_id, event_id, account_id, next_attempt_at)
      select w.id, ev.id, w.account_id,
        case when row_number() over () <= ${held}::int then statement_timestamp() + make_interval(secs => ${claimSecs}::float8)
             else now() end
      from ev join webhooks w on w.account_id = ev.account_id and w.is_active and ev.type = any (w.events)
      returning id, webhook_id, event_id, next_attempt_at > now() as taken
    ), wake as (
      select pg_notify(${WEBHOOK_WAKE_CHANNEL}, '') from (select 1) one where exists (select 1 from fan where not fan.taken)
    )
    -- \`woke\` is read by no one: naming \`wake\` here is what makes Postgres run it (a CTE that only
    -- selects runs only when referenced)
    select (select count(*) from wake) as woke, now() as created_at,
      (select coalesce(json_agg(json_build_array(f.id::text, f.webhook_id, f.event_id, w.url, w.secret_sealed, ev.data)), '[]')
       from fan f join webhooks w on w.id = f.webhook_id join ev on ev.id = f.event_id where f.taken) as taken`
  if (taker) {
    const byId = new Map(ids.map((id, i) => [id, events[i]!]))
    // `data` as stored (jsonb orders an object's keys its own way), so that this first attempt's body is
    // the very one a claim would build for a retry
    own = result!.taken.map(([deliveryId, webhookId, eventId, url, secretSealed, data]) => {
      const e = byId.get(eventId)!
      return { deliveryId, webhookId, url, secretSealed, event: { id: eventId, type: e.type, createdAt: result!.created_at, actor: e.actor, data } }
    })
    taker.release(held - own.length)
    held = own.length
  }
  return ids
}

// Lemon Squeezy: `X-Signature` is the hex HMAC-SHA256 of the raw body under the webhook's signing
// secret (Lemon Squeezy's documented check; there is no library for it). The payload carries no event
// id and no timestamp: the inbox key is the event name, the object id and its `updated_at`, which a
// redelivery repeats and a new change does not.
import { createHmac, timingSafeEqual } from 'node:crypto'
import { BadSignature, buyerEmail, buyerName, fromIso, Malformed, obj, storable, optStr, quantity, str, type Intent, type ReadEvent } from '../intents'

export function verifyLemonSqueezy(raw: Buffer, headers: Headers, secret: string): unknown {
  const given = headers.get('x-signature') ?? ''
  const expected = createHmac('sha256', secret).update(raw).digest()
  const sent = /^[0-9a-f]{64}$/i.test(given) ? Buffer.from(given, 'hex') : null
  if (!sent || !timingSafeEqual(sent, expected)) throw new BadSignature(given ? 'the X-Signature does not match the body' : 'the X-Signature header is missing')
  let payload: unknown
  try {
    payload = JSON.parse(raw.toString('utf8'))
  } catch {
    throw new Malformed('the body is not JSON')
  }
  return storable(payload)
}

function interpret(name: string, data: Record<string, any>): Intent {
  const a = obj(data.attributes, 'data.attributes')
  const id = str(data.id, 'data.id')
  switch (name) {
    case 'order_created': {
      if (a.status !== 'paid') return { kind: 'none', detail: `order status ${String(a.status)}: no key until it is paid` }
      const item = obj(a.first_order_item, 'data.attributes.first_order_item')
      return {
        kind: 'purchase',
        refs: [`order:${id}`],
        lines: [{ price: str(item.variant_id, 'first_order_item.variant_id'), quantity: quantity(item.quantity) }],
        ...buyerEmail(a.user_email),
        name: buyerName(a.user_name),
        ids: compact({ order: id, order_identifier: a.identifier, customer: a.customer_id }),
      }
    }
    case 'subscription_created':
    case 'subscription_updated':
    case 'subscription_resumed':
    case 'subscription_unpaused':
    case 'subscription_paused':
    case 'subscription_cancelled':
    case 'subscription_expired':
      return subscription(name, id, a)
    case 'subscription_payment_success':
      return { kind: 'none', detail: "a renewal's new period arrives as subscription_updated (renews_at)" }
    case 'subscription_payment_failed':
      return { kind: 'none', detail: "payment failed: the key runs to the end of its paid period plus the policy's grace" }
    case 'order_refunded':
      if (a.status !== 'refunded') return { kind: 'none', detail: 'a partial refund: the key stays' }
      return { kind: 'revoke', refs: [`order:${id}`], reason: 'refunded' }
    case 'subscription_payment_refunded':
      if (a.status !== 'refunded') return { kind: 'none', detail: 'a partial refund: the key stays' }
      return { kind: 'revoke', refs: [`sub:${str(a.subscription_id, 'data.attributes.subscription_id')}`], reason: 'refunded' }
    default:
      return { kind: 'none', detail: `Keyward does not act on ${name}` }
  }
}

function subscription(name: string, id: string, a: Record<string, any>): Intent {
  const refs = [`sub:${id}`, ...(optStr(a.order_id) ? [`order:${optStr(a.order_id)}`] : [])]
  const status = String(a.status)
  if (name === 'subscription_paused' || status === 'paused') return { kind: 'suspend', refs, reason: 'subscription_paused' }
  if (name === 'subscription_cancelled' || name === 'subscription_expired' || status === 'cancelled' || status === 'expired') {
    return { kind: 'end', refs, at: fromIso(a.ends_at) ?? new Date() }
  }
  if (status === 'active' || status === 'on_trial') {
    return {
      kind: 'subscription',
      refs,
      lines: [{ price: str(a.variant_id, 'data.attributes.variant_id'), quantity: 1 }],
      ...buyerEmail(a.user_email),
      name: buyerName(a.user_name),
      ids: compact({ subscription: id, order: a.order_id, customer: a.customer_id }),
      periodEnd: fromIso(status === 'on_trial' ? (a.trial_ends_at ?? a.renews_at) : a.renews_at),
      create: name === 'subscription_created',
    }
  }
  return { kind: 'none', detail: `subscription status ${status}: nothing to change (the key runs to the end of its paid period plus grace)` }
}

function compact(ids: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(ids)) if (optStr(v)) out[k] = optStr(v)!
  return out
}

export function readLemonSqueezy(payload: unknown, headers: Headers): ReadEvent {
  const body = obj(payload, 'the body')
  const name = optStr(obj(body.meta, 'meta').event_name) ?? optStr(headers.get('x-event-name'))
  if (!name) throw new Malformed('meta.event_name is missing')
  const data = obj(body.data, 'data')
  const updated = optStr(data.attributes?.updated_at) ?? ''
  return { id: `${name}:${str(data.id, 'data.id')}:${updated}`, type: name, intent: interpret(name, data) }
}

// Paddle Billing: the `Paddle-Signature` (ts=…;h1=…, HMAC-SHA256 of `ts:body`) verified by
// `@paddle/paddle-node-sdk`, which also refuses a stale timestamp (5 s, the SDK's own tolerance); one
// more than 30 s ahead is refused here (intents.ts).
// The payload is read as sent (snake_case, the shapes of the SDK's notification types).
import { Paddle, Webhooks } from '@paddle/paddle-node-sdk'
import { BadSignature, buyerEmail, buyerName, fromIso, Malformed, notFromTheFuture, obj, storable, optStr, quantity, str, type Intent, type Line, type ReadEvent } from '../intents'

// The SDK picks its crypto (Node's or Web Crypto, by runtime) when a client is constructed; without
// one, isSignatureValid answers false for every signature. The client never calls Paddle here.
new Paddle('unused_keyward_verifies_webhooks_only')
const webhooks = new Webhooks()

export async function verifyPaddle(raw: Buffer, headers: Headers, secret: string): Promise<unknown> {
  const signature = headers.get('paddle-signature')
  if (!signature) throw new BadSignature('the Paddle-Signature header is missing')
  const text = raw.toString('utf8')
  let valid = false
  try {
    valid = await webhooks.isSignatureValid(text, secret, signature)
  } catch {
    throw new BadSignature('the Paddle-Signature header is malformed')
  }
  if (!valid) throw new BadSignature('the signature does not match the body, or it is stale')
  // verified, so `ts=` is the signed timestamp: the SDK refuses it only when old (intents.ts)
  notFromTheFuture(Number(/(?:^|;)\s*ts=(\d+)/.exec(signature)![1]))
  let payload: unknown
  try {
    payload = JSON.parse(text)
  } catch {
    throw new Malformed('the body is not JSON')
  }
  return storable(payload)
}

function lines(items: unknown): Line[] {
  if (!Array.isArray(items)) throw new Malformed('data.items is missing')
  return items.flatMap((i) => (optStr(i?.price?.id) ?? optStr(i?.price_id) ? [{ price: (optStr(i?.price?.id) ?? optStr(i?.price_id))!, quantity: quantity(i.quantity) }] : []))
}

function interpret(type: string, d: Record<string, any>): Intent {
  const id = str(d.id, 'data.id')
  switch (type) {
    case 'transaction.completed': {
      const sub = optStr(d.subscription_id)
      // Paddle's webhook names the customer by id only; a checkout may pass e-mail and name in custom_data
      const email = { ...buyerEmail(d.custom_data?.email), name: buyerName(d.custom_data?.name) }
      const ids = compact({ transaction: id, subscription: sub, customer: d.customer_id, invoice_number: d.invoice_number })
      if (!sub) return { kind: 'purchase', refs: [`txn:${id}`], lines: lines(d.items), ...email, ids }
      const periodEnd = fromIso(d.billing_period?.ends_at)
      return { kind: 'subscription', refs: [`sub:${sub}`, `txn:${id}`], lines: lines(d.items), ...email, ids, periodEnd, create: true }
    }
    case 'subscription.created':
    case 'subscription.activated':
    case 'subscription.updated':
    case 'subscription.resumed': {
      const refs = [`sub:${id}`]
      if (d.scheduled_change?.action === 'cancel') {
        const at = fromIso(d.scheduled_change.effective_at)
        if (!at) throw new Malformed('scheduled_change.effective_at is missing')
        return { kind: 'end', refs, at }
      }
      if (d.status === 'active' || d.status === 'trialing') {
        return { kind: 'subscription', refs, lines: [], email: null, ids: {}, periodEnd: fromIso(d.current_billing_period?.ends_at), create: false }
      }
      if (d.status === 'paused') return { kind: 'suspend', refs, reason: 'subscription_paused' }
      return { kind: 'none', detail: `subscription status ${String(d.status)}: the key runs to the end of its paid period plus grace` }
    }
    case 'subscription.paused':
      return { kind: 'suspend', refs: [`sub:${id}`], reason: 'subscription_paused' }
    case 'subscription.canceled':
      return { kind: 'end', refs: [`sub:${id}`], at: fromIso(d.canceled_at) ?? new Date() }
    case 'subscription.past_due':
    case 'transaction.payment_failed':
      return { kind: 'none', detail: "payment failed: the key runs to the end of its paid period plus the policy's grace" }
    case 'adjustment.created':
    case 'adjustment.updated': {
      const refs = [`txn:${str(d.transaction_id, 'data.transaction_id')}`]
      if (d.action === 'chargeback') return { kind: 'suspend', refs, reason: 'disputed' }
      if (d.action === 'chargeback_reverse') return { kind: 'reinstate', refs, reason: 'disputed' }
      if (d.action !== 'refund') return { kind: 'none', detail: `adjustment ${String(d.action)}: nothing to change` }
      if (d.status !== 'approved') return { kind: 'none', detail: `refund ${String(d.status)}: nothing until it is approved` }
      if (d.type !== 'full') return { kind: 'none', detail: 'a partial refund: the key stays' }
      return { kind: 'revoke', refs, reason: 'refunded' }
    }
    default:
      return { kind: 'none', detail: `Keyward does not act on ${type}` }
  }
}

function compact(ids: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(ids)) if (optStr(v)) out[k] = optStr(v)!
  return out
}

export function readPaddle(payload: unknown): ReadEvent {
  const body = obj(payload, 'the body')
  const type = str(body.event_type, 'event_type')
  return { id: str(body.event_id, 'event_id'), type, intent: interpret(type, obj(body.data, 'data')) }
}

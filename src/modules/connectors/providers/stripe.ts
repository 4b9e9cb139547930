// Stripe: the signature (`Stripe-Signature`, 300 s old at most, 30 s ahead at most) verified by the `stripe` package, and the
// events read from the payload alone. Both API shapes are read: the current one (invoice.parent,
// line.pricing.price_details, item.current_period_end) and the one before 2025 (invoice.subscription,
// line.price, subscription.current_period_end).
import Stripe from 'stripe'
import { BadSignature, buyerEmail, buyerName, fromUnix, Malformed, notFromTheFuture, obj, storable, optStr, quantity, str, type Intent, type Line, type ReadEvent } from '../intents'

// No API key: the client is only used for its webhook helpers, which never call Stripe.
const stripe = new Stripe('sk_unused_keyward_verifies_webhooks_only')
export const STRIPE_TOLERANCE_SECONDS = 300

export async function verifyStripe(raw: Buffer, headers: Headers, secret: string): Promise<Stripe.Event> {
  const signature = headers.get('stripe-signature')
  if (!signature) throw new BadSignature('the Stripe-Signature header is missing')
  let event: Stripe.Event
  try {
    event = await stripe.webhooks.constructEventAsync(raw, signature, secret, STRIPE_TOLERANCE_SECONDS)
  } catch (err) {
    // the signature verified but the body is not JSON
    if (err instanceof SyntaxError) throw new Malformed('the body is not JSON')
    // Stripe's own messages run to a paragraph; the connector page shows the point
    const message = err instanceof Error ? err.message : ''
    if (/tolerance/i.test(message)) throw new BadSignature(`the signature is older than ${STRIPE_TOLERANCE_SECONDS} s`)
    if (/unable to extract timestamp/i.test(message)) throw new BadSignature('the Stripe-Signature header is malformed')
    throw new BadSignature('no signature in the header matches the body under this signing secret')
  }
  // verified, so `t=` is the signed timestamp: the library refuses it only when old (intents.ts)
  notFromTheFuture(Number(/(?:^|,)\s*t=(\d+)/.exec(signature)![1]))
  return storable(event)
}

const idOf = (v: unknown): string | null => (typeof v === 'string' ? v : optStr((v as { id?: unknown } | null)?.id))
const refs = (...pairs: [string, unknown][]) =>
  pairs.flatMap(([kind, v]) => {
    const id = idOf(v)
    return id ? [`${kind}:${id}`] : []
  })

function invoiceLines(invoice: Record<string, any>): { lines: Line[]; periodEnd: Date | null } {
  const data = obj(invoice.lines, 'invoice.lines').data
  if (!Array.isArray(data)) throw new Malformed('invoice.lines.data is missing')
  const lines: Line[] = []
  let periodEnd: Date | null = null
  for (const line of data) {
    const price = optStr(line?.pricing?.price_details?.price) ?? idOf(line?.price)
    if (!price) continue
    lines.push({ price, quantity: quantity(line.quantity) })
    const end = fromUnix(line?.period?.end)
    if (end && (!periodEnd || end > periodEnd)) periodEnd = end
  }
  return { lines, periodEnd }
}

function sessionLines(session: Record<string, any>): Line[] {
  const expanded = session.line_items?.data
  if (Array.isArray(expanded)) {
    return expanded.flatMap((l) => (idOf(l?.price) ? [{ price: idOf(l.price)!, quantity: quantity(l.quantity) }] : []))
  }
  // A Checkout Session's webhook carries no line items: the vendor names the price in its metadata.
  const named = optStr(session.metadata?.keyward_price)
  if (!named) return []
  const n = Number.parseInt(optStr(session.metadata?.keyward_quantity) ?? '1', 10)
  return named.split(',').map((price) => ({ price: price.trim(), quantity: quantity(n) }))
}

/** The end of a subscription's current period (on its items since 2025, on itself before). */
function subscriptionPeriodEnd(sub: Record<string, any>): Date | null {
  const ends = (Array.isArray(sub.items?.data) ? sub.items.data : []).map((i: any) => fromUnix(i?.current_period_end)).filter(Boolean) as Date[]
  if (ends.length > 0) return new Date(Math.max(...ends.map((d) => d.getTime())))
  return fromUnix(sub.current_period_end)
}

function interpret(event: Stripe.Event): Intent {
  const o = obj((event.data as { object?: unknown })?.object, 'data.object') as Record<string, any>
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded': {
      if (o.mode === 'subscription') return { kind: 'none', detail: "a subscription's key is issued by its invoice.paid" }
      if (o.payment_status !== 'paid' && o.payment_status !== 'no_payment_required') {
        return { kind: 'none', detail: `payment_status is ${String(o.payment_status)}: the key waits for checkout.session.async_payment_succeeded` }
      }
      const email = { ...buyerEmail(optStr(o.customer_details?.email) ?? optStr(o.customer_email)), name: buyerName(o.customer_details?.name) }
      return {
        kind: 'purchase',
        refs: refs(['cs', str(o.id, 'data.object.id')], ['pi', o.payment_intent], ['in', o.invoice]),
        lines: sessionLines(o),
        ...email,
        ids: compact({ checkout_session: o.id, payment_intent: idOf(o.payment_intent), customer: idOf(o.customer) }),
      }
    }
    case 'invoice.paid':
    case 'invoice.payment_succeeded': {
      const sub = idOf(o.parent?.subscription_details?.subscription) ?? idOf(o.subscription)
      const { lines, periodEnd } = invoiceLines(o)
      const ids = compact({ invoice: o.id, subscription: sub, customer: idOf(o.customer) })
      const email = { ...buyerEmail(o.customer_email), name: buyerName(o.customer_name) }
      const invoiceRefs = refs(['in', str(o.id, 'data.object.id')], ['pi', o.payment_intent], ['ch', o.charge])
      if (!sub) return { kind: 'purchase', refs: invoiceRefs, lines, ...email, ids }
      return { kind: 'subscription', refs: [`sub:${sub}`, ...invoiceRefs], lines, ...email, ids, periodEnd, create: true }
    }
    case 'invoice.payment_failed':
      return { kind: 'none', detail: 'payment failed: the key runs to the end of its paid period plus the policy\'s grace' }
    case 'invoice_payment.paid':
      return { kind: 'link', refs: refs(['in', o.invoice]), more: refs(['pi', o.payment?.payment_intent], ['ch', o.payment?.charge]) }
    case 'customer.subscription.paused':
      return { kind: 'suspend', refs: refs(['sub', str(o.id, 'data.object.id')]), reason: 'subscription_paused' }
    case 'customer.subscription.resumed':
      return { kind: 'reinstate', refs: refs(['sub', str(o.id, 'data.object.id')]), reason: 'subscription_paused' }
    case 'customer.subscription.updated': {
      const subRefs = refs(['sub', str(o.id, 'data.object.id')])
      const end = subscriptionPeriodEnd(o)
      if (o.cancel_at_period_end === true || typeof o.cancel_at === 'number') {
        const at = fromUnix(o.cancel_at) ?? end
        if (!at) throw new Malformed('the subscription has no period end')
        return { kind: 'end', refs: subRefs, at }
      }
      if (o.status === 'active' || o.status === 'trialing') {
        return { kind: 'subscription', refs: subRefs, lines: [], email: null, ids: {}, periodEnd: end, create: false }
      }
      return { kind: 'none', detail: `subscription status ${String(o.status)}: nothing to change` }
    }
    case 'customer.subscription.deleted':
      return { kind: 'end', refs: refs(['sub', str(o.id, 'data.object.id')]), at: fromUnix(o.ended_at) ?? new Date() }
    case 'charge.refunded':
      if (o.refunded !== true) return { kind: 'none', detail: 'a partial refund: the key stays' }
      return { kind: 'revoke', refs: refs(['pi', o.payment_intent], ['ch', o.id], ['in', o.invoice]), reason: 'refunded' }
    case 'charge.dispute.created':
      return { kind: 'suspend', refs: refs(['pi', o.payment_intent], ['ch', o.charge]), reason: 'disputed' }
    case 'charge.dispute.closed':
      if (o.status === 'won') return { kind: 'reinstate', refs: refs(['pi', o.payment_intent], ['ch', o.charge]), reason: 'disputed' }
      return { kind: 'none', detail: `dispute closed (${String(o.status)}): the key stays suspended` }
    default:
      return { kind: 'none', detail: `Keyward does not act on ${event.type}` }
  }
}

function compact(ids: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(ids)) if (typeof v === 'string' && v) out[k] = v
  return out
}

export function readStripe(event: Stripe.Event): ReadEvent {
  const id = str(event.id, 'id')
  const type = str(event.type, 'type')
  return { id, type, intent: interpret(event) }
}

// The lifecycle through Stripe's webhooks, payloads shaped as Stripe documents them (the package's
// types) and signed by its own test helper: a one-time purchase (quantity multiplies the limit), a
// subscription from its first invoice through failed payment, renewal, pause/resume, cancellation,
// dispute and refund; every change attributed to the connector.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import type Stripe from 'stripe'
import { useHarness } from '../support/harness'
import { connectorSetup, DAY, deliver, stripeEvent, stripeHeaders, unix } from './helpers'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })

type Setup = Awaited<ReturnType<typeof connectorSetup>>

async function send(s: Setup, type: string, object: Record<string, unknown>) {
  const payload = JSON.stringify(stripeEvent(type, object))
  const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
  if (res.status !== 200) throw new Error(`${type} → ${res.status} ${JSON.stringify(res.body)}`)
  return res.body as { outcome: string; detail: string }
}

const getKey = async (s: Setup, id: string) => (await h.call('GET', `/v1/keys/${id}`, { token: s.token })).body
const keyIds = async (s: Setup) =>
  (await h.node.deps.sql<{ id: string }[]>`select id from license_keys where account_id = ${s.id} order by created_at`).map((r) => r.id)
const actors = async (s: Setup) =>
  [...(await h.node.deps.sql<{ type: string; actor_type: string; actor_id: string }[]>`select type, actor_type, actor_id from events
    where account_id = ${s.id} and type like 'key.%' order by seq`)]

function invoice(sub: string, price: string, periodEnd: number, id = `in_${Math.random().toString(36).slice(2, 12)}`) {
  const line: Partial<Stripe.InvoiceLineItem> = {
    id: `il_${id}`,
    object: 'line_item',
    quantity: 1,
    period: { start: periodEnd - 30 * 86_400, end: periodEnd },
    pricing: { type: 'price_details', price_details: { price, product: 'prod_x' }, unit_amount_decimal: '1000' } as unknown as Stripe.InvoiceLineItem.Pricing,
  }
  const inv: Partial<Stripe.Invoice> = {
    id,
    object: 'invoice',
    customer: 'cus_1',
    customer_email: 'subscriber@example.com',
    billing_reason: 'subscription_cycle',
    status: 'paid',
    parent: { type: 'subscription_details', quote_details: null, subscription_details: { subscription: sub, metadata: null } } as Stripe.Invoice.Parent,
    lines: { object: 'list', data: [line as Stripe.InvoiceLineItem], has_more: false, url: '' },
  }
  return inv as Record<string, unknown>
}

function subscription(id: string, periodEnd: number, extra: Partial<Stripe.Subscription> = {}) {
  const sub: Partial<Stripe.Subscription> = {
    id,
    object: 'subscription',
    status: 'active',
    cancel_at_period_end: false,
    cancel_at: null,
    items: { object: 'list', data: [{ id: 'si_1', current_period_end: periodEnd } as Stripe.SubscriptionItem], has_more: false, url: '' },
    ...extra,
  }
  return sub as Record<string, unknown>
}

describe('Stripe', () => {
  test('one-time purchase: a key per mapped line, quantity × activation_limit, buyer email and Stripe ids in metadata, actor connector', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_once'])
    const session: Partial<Stripe.Checkout.Session> = {
      id: 'cs_test_1',
      object: 'checkout.session',
      mode: 'payment',
      payment_status: 'paid',
      payment_intent: 'pi_1',
      customer: 'cus_9',
      customer_details: { email: 'buyer@example.com' } as Stripe.Checkout.Session.CustomerDetails,
      metadata: { keyward_price: 'price_once', keyward_quantity: '3' },
    }
    const answer = await send(s, 'checkout.session.completed', session as Record<string, unknown>)
    expect(answer.outcome).toBe('processed')
    const [id] = await keyIds(s)
    const key = await getKey(s, id!)
    expect(key).toMatchObject({ policy_id: s.policies[0].id, activation_limit: 6, status: 'active', expires_at: null, external_id: 'stripe:cs:cs_test_1' })
    expect(key.metadata).toEqual({
      provider: 'stripe',
      price: 'price_once',
      checkout_session: 'cs_test_1',
      payment_intent: 'pi_1',
      customer: 'cus_9',
      customer_email: 'buyer@example.com',
    })
    expect(await actors(s)).toEqual([{ type: 'key.created', actor_type: 'connector', actor_id: s.connector.id }])
    // the audit trail shows the connector as the actor
    const audit = await h.call('GET', '/v1/events?type=key.created', { token: s.token })
    expect(audit.body.data[0].actor).toEqual({ type: 'connector', id: s.connector.id })

    // an unpaid (async) session waits; a full refund of the payment revokes the key
    expect((await send(s, 'checkout.session.completed', { ...session, id: 'cs_test_2', payment_status: 'unpaid' })).outcome).toBe('ignored')
    const partial: Partial<Stripe.Charge> = { id: 'ch_1', object: 'charge', payment_intent: 'pi_1', refunded: false, amount: 100, amount_refunded: 50 }
    expect((await send(s, 'charge.refunded', partial as Record<string, unknown>)).outcome).toBe('ignored')
    expect((await getKey(s, id!)).status).toBe('active')
    expect((await send(s, 'charge.refunded', { ...partial, refunded: true, amount_refunded: 100 })).outcome).toBe('processed')
    expect(await getKey(s, id!)).toMatchObject({ status: 'revoked' })
    expect(await keyIds(s)).toHaveLength(1)
  })

  test('subscription: first invoice issues the key to period end; failed payment changes nothing; renewal extends; pause/resume; dispute; cancel', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_monthly'], { policy: { grace_seconds: 3 * 86_400 } })
    const end1 = unix(Date.now() + 30 * DAY)
    expect((await send(s, 'invoice.paid', invoice('sub_1', 'price_monthly', end1, 'in_1'))).outcome).toBe('processed')
    const [id] = await keyIds(s)
    expect(await getKey(s, id!)).toMatchObject({ expires_at: new Date(end1 * 1000).toISOString(), grace_seconds: 3 * 86_400, status: 'active', external_id: 'stripe:sub:sub_1' })
    // invoice.payment_succeeded for the same invoice: nothing new
    expect((await send(s, 'invoice.payment_succeeded', invoice('sub_1', 'price_monthly', end1, 'in_1'))).outcome).toBe('ignored')

    expect((await send(s, 'invoice.payment_failed', invoice('sub_1', 'price_monthly', end1, 'in_2'))).outcome).toBe('ignored')
    expect((await getKey(s, id!)).expires_at).toBe(new Date(end1 * 1000).toISOString())

    const end2 = unix(Date.now() + 60 * DAY)
    expect((await send(s, 'invoice.paid', invoice('sub_1', 'price_monthly', end2, 'in_3'))).outcome).toBe('processed')
    expect((await getKey(s, id!)).expires_at).toBe(new Date(end2 * 1000).toISOString())
    expect(await keyIds(s)).toHaveLength(1)

    await send(s, 'customer.subscription.paused', subscription('sub_1', end2, { status: 'paused' }))
    expect(await getKey(s, id!)).toMatchObject({ status: 'suspended', suspend_reason: 'subscription_paused' })
    await send(s, 'customer.subscription.resumed', subscription('sub_1', end2))
    expect(await getKey(s, id!)).toMatchObject({ status: 'active', suspend_reason: null })

    // a dispute on the subscription's payment (linked by invoice_payment.paid) suspends it
    const link = { id: 'inpay_1', object: 'invoice_payment', invoice: 'in_3', payment: { type: 'payment_intent', payment_intent: 'pi_sub' } }
    expect((await send(s, 'invoice_payment.paid', link)).outcome).toBe('processed')
    const dispute: Partial<Stripe.Dispute> = { id: 'dp_1', object: 'dispute', charge: 'ch_sub', payment_intent: 'pi_sub', status: 'needs_response' }
    await send(s, 'charge.dispute.created', dispute as Record<string, unknown>)
    expect(await getKey(s, id!)).toMatchObject({ status: 'suspended', suspend_reason: 'disputed' })
    // a renewal does not lift a dispute; a won dispute does
    await send(s, 'invoice.paid', invoice('sub_1', 'price_monthly', end2, 'in_4'))
    expect((await getKey(s, id!)).suspend_reason).toBe('disputed')
    await send(s, 'charge.dispute.closed', { ...dispute, status: 'won' })
    expect((await getKey(s, id!)).status).toBe('active')

    const cancelAt = unix(Date.now() + 10 * DAY)
    await send(s, 'customer.subscription.updated', subscription('sub_1', end2, { cancel_at_period_end: true, cancel_at: cancelAt }))
    expect((await getKey(s, id!)).expires_at).toBe(new Date(cancelAt * 1000).toISOString())
    const ended = unix(Date.now() - 1000)
    await send(s, 'customer.subscription.deleted', subscription('sub_1', end2, { status: 'canceled', ended_at: ended }))
    expect((await getKey(s, id!)).expires_at).toBe(new Date(ended * 1000).toISOString())

    const types = (await actors(s)).map((e) => `${e.type}:${e.actor_type}`)
    expect(types).toEqual([
      'key.created:connector',
      'key.extended:connector',
      'key.suspended:connector',
      'key.reinstated:connector',
      'key.suspended:connector',
      'key.reinstated:connector',
      'key.extended:connector',
      'key.extended:connector',
    ])
  })

  test('a revoked key stays revoked: a renewal, a pause and a resume are ignored, the inbox names the key and why', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_monthly'])
    const end1 = unix(Date.now() + 30 * DAY)
    expect((await send(s, 'invoice.paid', invoice('sub_r', 'price_monthly', end1, 'in_r1'))).outcome).toBe('processed')
    const [id] = await keyIds(s)
    expect((await h.call('POST', `/v1/keys/${id}/revoke`, { token: s.token, body: { reason: 'chargeback elsewhere' } })).status).toBe(200)
    const before = await getKey(s, id!)

    const renewal = await send(s, 'invoice.paid', invoice('sub_r', 'price_monthly', unix(Date.now() + 60 * DAY), 'in_r2'))
    expect(renewal).toMatchObject({ outcome: 'ignored', detail: `not changed, revoked (revoking is final): ${id}` })
    const paused = await send(s, 'customer.subscription.paused', subscription('sub_r', end1, { status: 'paused' }))
    expect(paused).toMatchObject({ outcome: 'ignored', detail: `not changed, revoked (revoking is final): ${id}` })
    const resumed = await send(s, 'customer.subscription.resumed', subscription('sub_r', end1))
    expect(resumed).toMatchObject({ outcome: 'ignored', detail: `not changed, revoked (revoking is final): ${id}` })
    // the inbox keeps the reason for the console
    const [row] = await h.node.deps.sql<{ outcome: string; detail: string }[]>`select outcome, detail from connector_events
      where connector_id = ${s.connector.id} order by received_at desc limit 1`
    expect(row).toEqual({ outcome: 'ignored', detail: `not changed, revoked (revoking is final): ${id}` })

    expect(await getKey(s, id!)).toEqual(before)
    expect((await actors(s)).map((e) => e.type)).toEqual(['key.created', 'key.revoked'])
  })
})

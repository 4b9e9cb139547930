// A payment connector's purchase records the buyer as the key's customer (docs/payments.md, "The
// buyer"): e-mail (lower-cased), name and the provider's customer id, as far as the payload has them;
// key.created carries it, and the search finds the key by any of them.
import { expect, setDefaultTimeout, test } from 'bun:test'
import type Stripe from 'stripe'
import { useHarness } from '../support/harness'
import { eventsOf } from '../support/helpers'
import { connectorSetup, deliver, lemonHeaders, stripeEvent, stripeHeaders } from './helpers'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })

const keysOf = async (token: string, q = '') => (await h.call('GET', `/v1/keys${q}`, { token })).body.data as { id: string; customer: unknown }[]

test('Stripe checkout: e-mail, name and customer id become the key\'s customer, in key.created, and searchable', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'])
  const session: Partial<Stripe.Checkout.Session> = {
    id: 'cs_customer_1',
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    payment_intent: 'pi_customer_1',
    customer: 'cus_Stripe42',
    customer_details: { email: 'Buyer.One@Example.COM', name: 'Buyer One' } as Stripe.Checkout.Session.CustomerDetails,
    metadata: { keyward_price: 'price_a' },
  }
  const payload = JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
  const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
  expect(res.body.outcome).toBe('processed')
  const [key] = await keysOf(s.token)
  const customer = { email: 'buyer.one@example.com', name: 'Buyer One', external_id: 'cus_Stripe42' }
  expect(key!.customer).toEqual(customer)
  const [created] = await eventsOf(h, s.id, 'key.created')
  expect(created!.data.customer).toEqual(customer)
  for (const q of ['cus_Stripe42', 'buyer.one', 'BUYER ONE']) expect((await keysOf(s.token, `?q=${encodeURIComponent(q)}`)).map((k) => k.id)).toEqual([key!.id])
})

test('Stripe invoice without a name, and an address that is not one: the customer is what is valid', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'])
  const invoice = {
    id: 'in_customer_2',
    object: 'invoice',
    customer: 'cus_Inv7',
    customer_email: 'two@example.com, three@example.com',
    lines: { data: [{ pricing: { price_details: { price: 'price_a' } }, quantity: 1 }] },
  }
  const payload = JSON.stringify(stripeEvent('invoice.paid', invoice))
  expect((await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))).body.outcome).toBe('processed')
  expect((await keysOf(s.token))[0]!.customer).toEqual({ email: null, name: null, external_id: 'cus_Inv7' })
})

test('Lemon Squeezy order: user_email, user_name and customer_id', async () => {
  const s = await connectorSetup(h, 'lemonsqueezy', ['11'])
  const attributes = {
    store_id: 1,
    customer_id: 7,
    identifier: 'a1b2c3',
    user_email: 'ls-buyer@example.com',
    user_name: '  Lemon\u0007 Buyer ',
    status: 'paid',
    refunded: false,
    first_order_item: { order_id: 1, variant_id: 11, quantity: 1 },
    updated_at: new Date().toISOString(),
  }
  const payload = JSON.stringify({ meta: { event_name: 'order_created', custom_data: null }, data: { type: 'orders', id: '500', attributes } })
  const res = await deliver(h, s.connector.endpoint_path, payload, lemonHeaders(payload, 'order_created'))
  expect(res.body.outcome).toBe('processed')
  expect((await keysOf(s.token))[0]!.customer).toEqual({ email: 'ls-buyer@example.com', name: 'Lemon  Buyer', external_id: '7' })
})

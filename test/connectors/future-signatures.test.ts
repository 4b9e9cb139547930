// Stripe's and Paddle's libraries refuse a signature only when it is old. One dated more than 30 s
// (intents.ts FUTURE_SKEW_SECONDS) ahead of this server is refused too (400 on the signature header, no
// key), so a captured future-dated request cannot be replayed once its time comes; a small skew is accepted.
import { expect, setDefaultTimeout, test } from 'bun:test'
import type Stripe from 'stripe'
import { useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { connectorSetup, deliver, paddleHeaders, stripeEvent, stripeHeaders } from './helpers'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })
const now = () => Math.floor(Date.now() / 1000)
const keyCount = async (accountId: string) =>
  (await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${accountId}`)[0]!.n

function stripePurchase() {
  const session: Partial<Stripe.Checkout.Session> = {
    id: `cs_${Math.random().toString(36).slice(2, 12)}`,
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    payment_intent: `pi_${Math.random().toString(36).slice(2, 12)}`,
    metadata: { keyward_price: 'price_a' },
  }
  return JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
}

function paddlePurchase() {
  const id = `txn_${Math.random().toString(36).slice(2, 12)}`
  return JSON.stringify({
    event_id: `evt_${id}`,
    event_type: 'transaction.completed',
    data: { id, status: 'completed', subscription_id: null, custom_data: null, items: [{ price: { id: 'price_a' }, quantity: 1 }] },
  })
}

test('Stripe: a signature dated beyond the skew is refused; within it, processed', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'])
  for (const ahead of [60, 3600, 86_400 * 365]) {
    const payload = stripePurchase()
    const res = await deliver(h, s.connector.endpoint_path, payload, await stripeHeaders(payload, { timestamp: now() + ahead }))
    expect(expectProblem(res, 400, 'invalid_request').errors[0].field).toBe('signature')
  }
  expect(await keyCount(s.id)).toBe(0)
  const payload = stripePurchase()
  const ok = await deliver(h, s.connector.endpoint_path, payload, await stripeHeaders(payload, { timestamp: now() + 5 }))
  expect(ok.status).toBe(200)
  expect(ok.body.outcome).toBe('processed')
  expect(await keyCount(s.id)).toBe(1)
})

test('Paddle: a signature dated beyond the skew is refused; within it, processed', async () => {
  const s = await connectorSetup(h, 'paddle', ['price_a'])
  for (const ahead of [60, 3600, 86_400 * 365]) {
    const payload = paddlePurchase()
    const res = await deliver(h, s.connector.endpoint_path, payload, paddleHeaders(payload, { timestamp: now() + ahead }))
    expect(expectProblem(res, 400, 'invalid_request').errors[0].field).toBe('signature')
  }
  expect(await keyCount(s.id)).toBe(0)
  const payload = paddlePurchase()
  const ok = await deliver(h, s.connector.endpoint_path, payload, paddleHeaders(payload, { timestamp: now() + 2 }))
  expect(ok.status).toBe(200)
  expect(ok.body.outcome).toBe('processed')
  expect(await keyCount(s.id)).toBe(1)
})

// Payment connectors in tests: a connector with a policy behind each mapped price, and provider
// webhooks signed as each provider signs them (Stripe with its own test helper, Paddle's
// `ts=…;h1=…` HMAC of `ts:body`, Lemon Squeezy's hex HMAC of the body in X-Signature).
import { createHmac } from 'node:crypto'
import Stripe from 'stripe'
import { newProduct, type Harness } from '../support/harness'

const stripe = new Stripe('sk_test_unused')
export const SECRET = 'whsec_test_0123456789abcdef0123456789abcdef'

export async function newPolicy(h: Harness, token: string, productId: string, extra: Record<string, unknown> = {}) {
  const res = await h.call('POST', '/v1/policies', { token, body: { product_id: productId, name: 'Pro', activation_limit: 2, ...extra } })
  if (res.status !== 201) throw new Error(`policy creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

/** A fresh account with a product, a policy per price, and a connector mapping them. */
export async function connectorSetup(
  h: Harness,
  provider: 'stripe' | 'paddle' | 'lemonsqueezy',
  prices: string[],
  opts: { email_keys?: boolean; policy?: Record<string, unknown> } = {},
) {
  const account = await h.account()
  const product = await newProduct(h.call, account.token)
  const policies: { id: string }[] = []
  for (const price of prices) policies.push(await newPolicy(h, account.token, product.id, { name: `Policy ${price}`, ...opts.policy }))
  const res = await h.call('POST', '/v1/connectors', {
    token: account.token,
    body: {
      provider,
      name: `${provider} shop`,
      signing_secret: SECRET,
      mappings: prices.map((price, i) => ({ price, policy_id: policies[i].id })),
      email_keys: opts.email_keys ?? false,
    },
  })
  if (res.status !== 201) throw new Error(`connector creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return { ...account, product, policies, connector: res.body }
}

// Under Bun the package uses Web Crypto, which has only the async form of the helper.
export async function stripeHeaders(payload: string, opts: { secret?: string; timestamp?: number } = {}) {
  const header = await stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: opts.secret ?? SECRET, timestamp: opts.timestamp })
  return { 'stripe-signature': header, 'content-type': 'application/json' }
}

export function paddleHeaders(payload: string, opts: { secret?: string; timestamp?: number } = {}) {
  const ts = opts.timestamp ?? Math.floor(Date.now() / 1000)
  const h1 = createHmac('sha256', opts.secret ?? SECRET).update(`${ts}:${payload}`).digest('hex')
  return { 'paddle-signature': `ts=${ts};h1=${h1}`, 'content-type': 'application/json' }
}

export function lemonHeaders(payload: string, eventName: string, opts: { secret?: string } = {}) {
  const sig = createHmac('sha256', opts.secret ?? SECRET).update(payload).digest('hex')
  return { 'x-signature': sig, 'x-event-name': eventName, 'content-type': 'application/json' }
}

/** Sends a provider webhook to the connector's endpoint. */
export const deliver = async (h: Harness, path: string, payload: string, headers: Record<string, string> | Promise<Record<string, string>>) =>
  h.call('POST', path, { raw: payload, headers: await headers })

/** A Stripe event envelope around `object`, as Stripe sends it. */
export function stripeEvent(type: string, object: Record<string, unknown>, id = `evt_${Math.random().toString(36).slice(2, 14)}`): Stripe.Event {
  return {
    id,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: Math.floor(Date.now() / 1000),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  } as unknown as Stripe.Event
}

export const unix = (ms: number) => Math.floor(ms / 1000)
export const DAY = 86_400_000

// Two real node processes and one provider event redelivered to both at once, many times: the inbox's
// unique index makes it one key, one key.created, one processed answer; every other copy, on either
// node, is answered `duplicate`.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type Stripe from 'stripe'
import { newProduct } from '../support/harness'
import { startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { SECRET, stripeEvent, stripeHeaders } from '../connectors/helpers'

const ready = await requireCluster('cluster/connectors')

describe.if(ready)('two nodes: a provider event redelivered to both', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(2)
  }, 90_000)
  afterAll(() => c?.close(), 60_000)

  test('the same signed event 12 times, alternating nodes, all at once: one key, the rest duplicate', async () => {
    const { id: accountId, token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    const policy = (await c.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Pro' } })).body
    const connector = (
      await c.call('POST', '/v1/connectors', {
        token,
        body: { provider: 'stripe', name: 'Shop', signing_secret: SECRET, mappings: [{ price: 'price_a', policy_id: policy.id }] },
      })
    ).body
    const session: Partial<Stripe.Checkout.Session> = {
      id: 'cs_cluster',
      object: 'checkout.session',
      mode: 'payment',
      payment_status: 'paid',
      payment_intent: 'pi_cluster',
      customer_details: { email: 'buyer@example.com' } as Stripe.Checkout.Session.CustomerDetails,
      metadata: { keyward_price: 'price_a' },
    }
    const payload = JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
    const headers = await stripeHeaders(payload)
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => c.nodes[i % 2]!.call('POST', connector.endpoint_path, { raw: payload, headers })),
    )
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200))
    expect(answers.filter((a) => a.body.outcome === 'processed')).toHaveLength(1)
    expect(answers.filter((a) => a.body.outcome === 'duplicate')).toHaveLength(11)
    expect(await c.sql`select id from license_keys where account_id = ${accountId}`).toHaveLength(1)
    expect(await c.sql`select id from events where account_id = ${accountId} and type = 'key.created'`).toHaveLength(1)

    // a refund of that payment at the other node revokes the one key, once
    const charge: Partial<Stripe.Charge> = { id: 'ch_cluster', object: 'charge', payment_intent: 'pi_cluster', refunded: true }
    const refund = JSON.stringify(stripeEvent('charge.refunded', charge as Record<string, unknown>))
    const refundHeaders = await stripeHeaders(refund)
    const refunds = await Promise.all([0, 1, 0, 1].map((n) => c.nodes[n]!.call('POST', connector.endpoint_path, { raw: refund, headers: refundHeaders })))
    expect(refunds.filter((a) => a.body.outcome === 'processed')).toHaveLength(1)
    expect(await c.sql`select id from events where account_id = ${accountId} and type = 'key.revoked'`).toHaveLength(1)
    const [key] = await c.sql<{ status: string; revoke_reason: string }[]>`select status, revoke_reason from license_keys where account_id = ${accountId}`
    expect(key).toEqual({ status: 'revoked', revoke_reason: 'refunded' })
  }, 120_000)
})

// Connectors over the app: CRUD (write-only secret sealed at rest, mappings checked, accounts
// isolated), and the inbound endpoint's refusals: unknown connector, bad or stale signature,
// malformed payload, unmapped price (answered, no key written, shown on the connector; a refusal is
// not claimed, so a redelivery after the fix is processed), and exactly-once under concurrent
// redeliveries.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import type Stripe from 'stripe'
import { open } from '../../src/infra/crypto'
import { pruneConnectorHistory } from '../../src/modules/connectors/retention'
import { newProduct, useHarness } from '../support/harness'
import { expectProblem, ghostId, ID, ISO_MS } from '../support/helpers'
import { connectorSetup, deliver, newPolicy, SECRET, stripeEvent, stripeHeaders } from './helpers'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })

const keysOf = async (accountId: string) =>
  (await h.node.deps.sql<{ id: string }[]>`select id from license_keys where account_id = ${accountId} order by created_at`).map((r) => r.id)

function purchase(price: string, quantity = 1, email = 'buyer@example.com') {
  const session: Partial<Stripe.Checkout.Session> = {
    id: `cs_test_${Math.random().toString(36).slice(2, 12)}`,
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    status: 'complete',
    payment_intent: `pi_${Math.random().toString(36).slice(2, 12)}`,
    customer_details: { email } as Stripe.Checkout.Session.CustomerDetails,
    metadata: { keyward_price: price, keyward_quantity: String(quantity) },
  }
  return JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
}

describe('connectors CRUD', () => {
  test('POST → 201 without the secret; sealed at rest; GET, list, PATCH, DELETE; other accounts see nothing', async () => {
    const { id: accountId, token } = await h.account()
    const product = await newProduct(h.call, token)
    const policy = await newPolicy(h, token, product.id)
    const res = await h.call('POST', '/v1/connectors', {
      token,
      body: { provider: 'stripe', name: 'Shop', signing_secret: SECRET, mappings: [{ price: 'price_123', policy_id: policy.id }], email_keys: true },
    })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(ID('con')),
      provider: 'stripe',
      name: 'Shop',
      mappings: [{ price: 'price_123', policy_id: policy.id }],
      email_keys: true,
      endpoint_path: `/hooks/${res.body.id}`,
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
    })
    expect(JSON.stringify(res.body)).not.toContain(SECRET)
    const [row] = await h.node.deps.sql<{ secret_sealed: string }[]>`select secret_sealed from connectors where id = ${res.body.id}`
    expect(row!.secret_sealed).not.toContain(SECRET)
    expect(open(h.node.deps.secretKey, row!.secret_sealed).toString('utf8')).toBe(SECRET)

    const got = await h.call('GET', `/v1/connectors/${res.body.id}`, { token })
    expect(got.status).toBe(200)
    expect(got.body).toEqual({ ...res.body, mail_enabled: false, events: [], emails: [] })
    const list = await h.call('GET', '/v1/connectors', { token })
    expect(list.body).toEqual({ data: [res.body], mail_enabled: false })

    const patched = await h.call('PATCH', `/v1/connectors/${res.body.id}`, { token, body: { name: 'Shop 2', mappings: [], signing_secret: 'whsec_new' } })
    expect(patched.status).toBe(200)
    expect(patched.body).toMatchObject({ name: 'Shop 2', mappings: [], email_keys: true })
    expect(JSON.stringify(patched.body)).not.toContain('whsec_new')

    const other = await h.account()
    expectProblem(await h.call('GET', `/v1/connectors/${res.body.id}`, { token: other.token }), 404, 'not_found')
    expectProblem(await h.call('DELETE', `/v1/connectors/${res.body.id}`, { token: other.token }), 404, 'not_found')
    expect((await h.call('GET', '/v1/connectors', { token: other.token })).body.data).toEqual([])

    expect((await h.call('DELETE', `/v1/connectors/${res.body.id}`, { token })).status).toBe(204)
    expectProblem(await h.call('GET', `/v1/connectors/${res.body.id}`, { token }), 404, 'not_found')
    expect(await keysOf(accountId)).toEqual([])
  })

  test('bad input is 400 and changes nothing: unknown provider, no secret, a policy of another account, a price mapped twice', async () => {
    const { token } = await h.account()
    const product = await newProduct(h.call, token)
    const policy = await newPolicy(h, token, product.id)
    const other = await h.account()
    const foreign = await newPolicy(h, other.token, (await newProduct(h.call, other.token)).id)
    const base = { provider: 'stripe', name: 'Shop', signing_secret: SECRET }
    expectProblem(await h.call('POST', '/v1/connectors', { token, body: { ...base, provider: 'paypal' } }), 400, 'invalid_request')
    expectProblem(await h.call('POST', '/v1/connectors', { token, body: { provider: 'stripe', name: 'x' } }), 400, 'invalid_request')
    const bad = await h.call('POST', '/v1/connectors', { token, body: { ...base, mappings: [{ price: 'p', policy_id: foreign.id }] } })
    expect(expectProblem(bad, 400, 'invalid_request').errors[0].field).toBe('body.mappings.0.policy_id')
    const twice = await h.call('POST', '/v1/connectors', {
      token,
      body: { ...base, mappings: [{ price: 'p', policy_id: policy.id }, { price: 'p', policy_id: policy.id }] },
    })
    expect(expectProblem(twice, 400, 'invalid_request').errors[0].field).toBe('body.mappings.1.price')
    expect((await h.call('GET', '/v1/connectors', { token })).body.data).toEqual([])
    expectProblem(await h.call('PATCH', `/v1/connectors/${ghostId('con')}`, { token, body: { name: 'x' } }), 404, 'not_found')
  })
})

describe('POST /hooks/:connector_id refusals', () => {
  test('unknown connector → 400, nothing recorded; bad and stale signatures → the same 400, no key, the first shown on the connector', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    const payload = purchase('price_a')
    const unknown = await deliver(h, `/hooks/${ghostId('con')}`, payload, stripeHeaders(payload))
    expect(expectProblem(unknown, 400, 'invalid_request').errors[0].field).toBe('signature')
    expectProblem(await deliver(h, '/hooks/not-an-id', payload, stripeHeaders(payload)), 400, 'invalid_request')

    const wrong = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload, { secret: 'whsec_wrong' }))
    expect(expectProblem(wrong, 400, 'invalid_request').errors[0].field).toBe('signature')
    const stale = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload, { timestamp: Math.floor(Date.now() / 1000) - 400 }))
    expectProblem(stale, 400, 'invalid_request')
    const tampered = await deliver(h, s.connector.endpoint_path, payload.replace('buyer@', 'thief@'), stripeHeaders(payload))
    expectProblem(tampered, 400, 'invalid_request')
    const none = await deliver(h, s.connector.endpoint_path, payload, { 'content-type': 'application/json' })
    expectProblem(none, 400, 'invalid_request')

    expect(await keysOf(s.id)).toEqual([])
    const detail = (await h.call('GET', `/v1/connectors/${s.connector.id}`, { token: s.token })).body
    // sampled: one bad signature per connector a minute is written, every one counted (hook-gate.ts)
    expect(detail.events.map((e: { outcome: string }) => e.outcome)).toEqual(['bad_signature'])
    expect(detail.events[0]).toMatchObject({ provider_event_id: null, key_ids: [], received_at: expect.stringMatching(ISO_MS) })
  })

  test('a signed body that is not JSON, or not an event → 400 malformed; nothing written', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    for (const body of ['not json', '{"id": 5}']) {
      const res = await deliver(h, s.connector.endpoint_path, body, stripeHeaders(body))
      expectProblem(res, 400, 'invalid_request')
    }
    expect(await keysOf(s.id)).toEqual([])
    const detail = (await h.call('GET', `/v1/connectors/${s.connector.id}`, { token: s.token })).body
    expect(detail.events.map((e: { outcome: string }) => e.outcome)).toEqual(['malformed', 'malformed'])
  })

  test('an unmapped price → 200 unmapped, no key, shown; once mapped, the same event redelivered issues the key', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    const payload = purchase('price_other')
    const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ received: true, outcome: 'unmapped' })
    expect(res.body.detail).toContain('price_other')
    expect(await keysOf(s.id)).toEqual([])
    let detail = (await h.call('GET', `/v1/connectors/${s.connector.id}`, { token: s.token })).body
    expect(detail.events).toHaveLength(1)
    expect(detail.events[0]).toMatchObject({ outcome: 'unmapped', type: 'checkout.session.completed', provider_event_id: null })

    const mappings = [...s.connector.mappings, { price: 'price_other', policy_id: s.policies[0].id }]
    expect((await h.call('PATCH', `/v1/connectors/${s.connector.id}`, { token: s.token, body: { mappings } })).status).toBe(200)
    const again = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
    expect(again.body).toMatchObject({ received: true, outcome: 'processed' })
    expect(await keysOf(s.id)).toHaveLength(1)
    detail = (await h.call('GET', `/v1/connectors/${s.connector.id}`, { token: s.token })).body
    expect(detail.events[0]).toMatchObject({ outcome: 'processed', provider_event_id: JSON.parse(payload).id })
  })

  test('the same signed event sent 8 times at once: one key, one key.created, the others answered duplicate', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    const payload = purchase('price_a')
    const answers = await Promise.all(Array.from({ length: 8 }, () => deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))))
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200))
    expect(answers.filter((a) => a.body.outcome === 'processed')).toHaveLength(1)
    expect(answers.filter((a) => a.body.outcome === 'duplicate')).toHaveLength(7)
    expect(await keysOf(s.id)).toHaveLength(1)
    const created = await h.node.deps.sql`select 1 from events where account_id = ${s.id} and type = 'key.created'`
    expect(created).toHaveLength(1)
    const received = await h.node.deps.sql`select 1 from connector_events where connector_id = ${s.connector.id}`
    expect(received).toHaveLength(1)
  })

  test('without SMTP_URL a connector with email_keys still issues keys, says mail is off, and keeps no key value', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'], { email_keys: true })
    const payload = purchase('price_a')
    const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
    expect(res.body).toMatchObject({ outcome: 'processed' })
    expect(res.body.detail).toContain('mail is off')
    expect(await keysOf(s.id)).toHaveLength(1)
    const detail = (await h.call('GET', `/v1/connectors/${s.connector.id}`, { token: s.token })).body
    expect(detail).toMatchObject({ mail_enabled: false, emails: [] })
    expect(await h.node.deps.sql`select 1 from connector_mails where connector_id = ${s.connector.id}`).toHaveLength(0)
  })

  test('a body over 1 MiB → 413', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    const big = JSON.stringify({ pad: 'x'.repeat(1024 * 1024 + 10) })
    expectProblem(await deliver(h, s.connector.endpoint_path, big, stripeHeaders(big)), 413, 'payload_too_large')
  })
})

test('retention: processed events and finished emails older than RETENTION_DAYS go; recent ones and pending emails stay', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'])
  const payload = purchase('price_a')
  await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
  const sql = h.node.deps.sql
  const [key] = await keysOf(s.id)
  const old = new Date(Date.now() - 100 * 86_400_000)
  await sql`insert into connector_events (id, connector_id, provider_event_id, type, outcome, received_at)
    values ('cev_old', ${s.connector.id}, 'evt_old', 'invoice.paid', 'processed', ${old})`
  await sql`insert into connector_mails (id, connector_id, account_id, key_id, to_email, status, created_at)
    values ('mail_old_sent', ${s.connector.id}, ${s.id}, ${key!}, 'a@example.com', 'sent', ${old}),
           ('mail_old_pending', ${s.connector.id}, ${s.id}, ${key!}, 'b@example.com', 'pending', ${old})`
  const pruned = await pruneConnectorHistory(sql, { days: 90 })
  expect(pruned.events).toBeGreaterThanOrEqual(1)
  expect(pruned.mails).toBeGreaterThanOrEqual(1)
  const events = await sql<{ provider_event_id: string }[]>`select provider_event_id from connector_events where connector_id = ${s.connector.id}`
  expect(events.map((e) => e.provider_event_id)).toEqual([JSON.parse(payload).id])
  const mails = await sql<{ id: string }[]>`select id from connector_mails where connector_id = ${s.connector.id}`
  expect(mails.map((m) => m.id)).toEqual(['mail_old_pending'])
})

// A lone UTF-16 surrogate is valid JSON (`"\ud800"`) but not storable text: Postgres's jsonb refuses it
// and UTF-8 cannot encode it. Wherever a request brings JSON (a body, an NDJSON line, a CSV cell holding
// JSON), it is a 400 naming the field, not a 500 from the write, and nothing is written.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { connectorSetup, deliver, newPolicy, stripeEvent, stripeHeaders } from '../connectors/helpers'

setDefaultTimeout(60_000)

const h = useHarness()
const LONE = ['\ud800', 'x\udc00', 'ok\ud83d']

const fieldsOf = (body: { errors?: { field: string }[]; rows?: { errors: { field: string }[] }[] }) => [
  ...(body.errors ?? []).map((e) => e.field),
  ...(body.rows ?? []).flatMap((r) => r.errors.map((e) => e.field)),
]

test('key metadata and entitlements, policy entitlements: 400 naming the field, nothing written', async () => {
  const { id: accountId, token } = await h.account()
  const product = await newProduct(h.call, token)
  const policy = await newPolicy(h, token, product.id)
  for (const s of LONE) {
    const meta = await h.call('POST', '/v1/keys', { token, body: { product_id: product.id, metadata: { note: s } } })
    expect(fieldsOf(expectProblem(meta, 400, 'invalid_request'))).toEqual(['body.metadata.note'])
    const metaKey = await h.call('POST', '/v1/keys', { token, body: { product_id: product.id, metadata: { [`k${s}`]: 1 } } })
    expect(fieldsOf(expectProblem(metaKey, 400, 'invalid_request'))).toEqual(['body.metadata'])
    const ent = await h.call('POST', '/v1/keys', { token, body: { product_id: product.id, entitlements: { tier: s } } })
    expect(fieldsOf(expectProblem(ent, 400, 'invalid_request'))).toEqual(['body.entitlements.tier'])
    const pol = await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { entitlements: { tier: s } } })
    expect(fieldsOf(expectProblem(pol, 400, 'invalid_request'))).toEqual(['body.entitlements.tier'])
  }
  const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${accountId}`
  expect(n).toBe(0)
})

test('connector mappings: 400 naming the mapping field', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const policy = await newPolicy(h, token, product.id)
  const res = await h.call('POST', '/v1/connectors', {
    token,
    body: { provider: 'stripe', name: 'shop', signing_secret: 'whsec_x', mappings: [{ price: 'price_\ud800', policy_id: policy.id }] },
  })
  expect(fieldsOf(expectProblem(res, 400, 'invalid_request'))).toEqual(['body.mappings.0.price'])
  const listed = await h.call('GET', '/v1/connectors', { token })
  expect(listed.body.data).toEqual([])
})

test('import: external_id and metadata in JSON rows, NDJSON lines and CSV JSON cells; nothing imported', async () => {
  const { id: accountId, token } = await h.account()
  const product = await newProduct(h.call, token)
  const json = await h.call('POST', '/v1/keys/import', { token, body: { rows: [{ key: 'legacy-value-0001', product_id: product.id, external_id: 'ord_\ud800' }] } })
  expect(fieldsOf(expectProblem(json, 400, 'invalid_request'))).toEqual(['body.rows.0.external_id'])

  const ndjson = `{"key":"legacy-value-0002","product_id":"${product.id}","external_id":"ord_\\ud800"}\n`
  const nd = await h.call('POST', '/v1/keys/import', { token, raw: ndjson, headers: { 'content-type': 'application/x-ndjson' } })
  expect(nd.status).toBe(422)
  expect(nd.body.rows).toEqual([{ line: 1, external_id: null, errors: [{ field: 'external_id', message: expect.stringContaining('surrogate') }] }])

  const csv = `key,product_id,metadata\nlegacy-value-0003,${product.id},"{""a"":""\\ud800""}"\n`
  const c = await h.call('POST', '/v1/keys/import', { token, raw: csv, headers: { 'content-type': 'text/csv' } })
  expect(c.status).toBe(422)
  expect(c.body.rows).toEqual([{ line: 2, external_id: null, errors: [{ field: 'metadata.a', message: expect.stringContaining('surrogate') }] }])

  const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${accountId}`
  expect(n).toBe(0)
})

test('an id echoed into a stored idempotent answer: 400, and the same key answers the same again', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  await newKey(h.call, token, product.id)
  const body = { product_id: `prod_\ud800` }
  const headers = { 'idempotency-key': `surrogate-${Math.random()}` }
  const first = await h.call('POST', '/v1/keys', { token, body, headers })
  expect(fieldsOf(expectProblem(first, 400, 'invalid_request'))).toEqual(['body.product_id'])
  const again = await h.call('POST', '/v1/keys', { token, body, headers })
  expect(again.status).toBe(400)
})

test('a surrogate pair (an emoji) is text like any other: stored and read back', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const res = await h.call('POST', '/v1/keys', { token, body: { product_id: product.id, metadata: { note: '😀 \ud83d\ude00' } } })
  expect(res.status).toBe(201)
  expect(res.body.metadata).toEqual({ note: '😀 😀' })
})

test('a signed provider payload: 400 malformed (not a 500 where its ids are written), no key', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'])
  for (const customer of ['cus_\ud800', 'cus_\u0000']) {
    const session = {
      id: `cs_${Math.random().toString(36).slice(2, 12)}`,
      object: 'checkout.session',
      mode: 'payment',
      payment_status: 'paid',
      payment_intent: `pi_${Math.random().toString(36).slice(2, 12)}`,
      customer,
      metadata: { keyward_price: 'price_a' },
    }
    const payload = JSON.stringify(stripeEvent('checkout.session.completed', session))
    const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
    const problem = expectProblem(res, 400, 'invalid_request')
    expect(problem.errors[0].field).toBe('body')
    expect(problem.errors[0].message).toContain('lone UTF-16 surrogate')
  }
  const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${s.id}`
  expect(n).toBe(0)
})

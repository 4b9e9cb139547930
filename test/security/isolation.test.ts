// Cross-account isolation: every `:id` route given another account's id is 404 (never 403), lists and
// filters never show another account's data, and nothing of the other account changes.
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, useHarness } from '../support/harness'
import { expectProblem, insertActivation } from '../support/helpers'

setDefaultTimeout(60_000)

const FP = 'cd'.repeat(32)

const h = useHarness({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } })
// B owns everything; A (full_access) tries to reach it.
let a: { id: string; token: string }
let b: { id: string; token: string }
let bProduct: any
let bKey: any
let bActivation: string
let bApiKey: any
let bWebhook: any
let bPolicy: any
beforeAll(async () => {
  a = await h.account('growth')
  b = await h.account('growth')
  bProduct = await newProduct(h.call, b.token, 'b-product')
  bKey = await newKey(h.call, b.token, bProduct.id)
  bPolicy = (await h.call('POST', '/v1/policies', { token: b.token, body: { product_id: bProduct.id, name: 'b-policy' } })).body
  bActivation = await insertActivation(h, bKey, b.id, { fingerprint: FP })
  bApiKey = (await h.call('POST', '/v1/api-keys', { token: b.token, body: { name: 'b-key', scope: 'keys:read' } })).body
  // subscribed to an event these tests never cause, so no delivery is attempted
  bWebhook = (await h.call('POST', '/v1/webhooks', { token: b.token, body: { url: 'http://127.0.0.1:9/hook', events: ['account.plan_changed'] } })).body
}, 60_000)

describe("another account's ids are 404 on every :id route", () => {
  // [method, path, body], built lazily: B's ids exist only once beforeAll ran
  const ROUTES: [string, () => string, unknown?][] = [
    ['GET', () => `/v1/products/${bProduct.id}`],
    ['PUT', () => `/v1/products/${bProduct.id}`, { name: 'hijacked' }],
    ['DELETE', () => `/v1/products/${bProduct.id}`],
    ['GET', () => `/v1/keys/${bKey.id}`],
    ['POST', () => `/v1/keys/${bKey.id}/revoke`, { reason: 'hijack' }],
    ['POST', () => `/v1/keys/${bKey.id}/extend`, { expires_at: new Date(Date.now() + 90 * 86_400_000).toISOString() }],
    ['POST', () => `/v1/keys/${bKey.id}/suspend`, { reason: 'hijack' }],
    ['POST', () => `/v1/keys/${bKey.id}/reinstate`],
    ['POST', () => `/v1/keys/${bKey.id}/reissue`],
    ['POST', () => `/v1/keys/${bKey.id}/credits`, { operation: 'add', amount: 5 }],
    ['GET', () => `/v1/policies/${bPolicy.id}`],
    ['PATCH', () => `/v1/policies/${bPolicy.id}`, { name: 'hijacked' }],
    ['DELETE', () => `/v1/policies/${bPolicy.id}`],
    ['DELETE', () => `/v1/keys/${bKey.id}/activations/${bActivation}`],
    ['POST', () => `/v1/keys/${bKey.id}/offline-licenses`, { device_fingerprint: 'ef'.repeat(32) }],
    ['POST', () => `/v1/api-keys/${bApiKey.id}/rotate`],
    ['DELETE', () => `/v1/api-keys/${bApiKey.id}`],
    ['GET', () => `/v1/webhooks/${bWebhook?.id}`],
    ['PATCH', () => `/v1/webhooks/${bWebhook?.id}`, { is_active: false }],
    ['POST', () => `/v1/webhooks/${bWebhook?.id}/test`],
    ['DELETE', () => `/v1/webhooks/${bWebhook?.id}`],
  ]

  test('B set up everything (products, keys, activation, API key, webhook)', () => {
    expect(bProduct.id).toMatch(/^prod_/)
    expect(bKey.id).toMatch(/^key_/)
    expect(bApiKey.id).toMatch(/^ak_/)
    expect(bWebhook?.id).toMatch(/^wh_/)
    expect(bPolicy?.id).toMatch(/^pol_/)
  })

  for (const [method, path, body] of ROUTES) {
    const label = path.toString().replace(/^\(\) => `/, '').replace(/`$/, '')
    test(`${method} ${label}`, async () => {
      expectProblem(await h.call(method, path(), { token: a.token, body }), 404, 'not_found')
    })
  }

  test("nothing of B's changed, and B still reaches all of it", async () => {
    const product = await h.call('GET', `/v1/products/${bProduct.id}`, { token: b.token })
    expect(product.body).toMatchObject({ name: 'b-product', active_keys: 1 })
    const key = await h.call('GET', `/v1/keys/${bKey.id}`, { token: b.token })
    expect(key.body).toMatchObject({ status: 'active', expires_at: null, revoked_at: null, activations_used: 1 })
    expect(key.body.activations[0]).toMatchObject({ id: bActivation, status: 'active' })
    const apiKeys = await h.call('GET', '/v1/api-keys', { token: b.token })
    expect(apiKeys.body.data.map((k: { id: string }) => k.id)).toContain(bApiKey.id)
    // not rotated: the original token still works
    expect((await h.call('GET', '/v1/ping', { token: bApiKey.token })).status).toBe(200)
    const webhook = await h.call('GET', `/v1/webhooks/${bWebhook.id}`, { token: b.token })
    expect(webhook.body).toMatchObject({ is_active: true, deliveries: [] })
  })
})

describe('lists, filters and lookups are per account', () => {
  test("A's lists never show B's products, keys, API keys or webhooks", async () => {
    expect((await h.call('GET', '/v1/products', { token: a.token })).body.data).toEqual([])
    expect((await h.call('GET', '/v1/keys', { token: a.token })).body).toMatchObject({ data: [], total: 0 })
    expect((await h.call('GET', `/v1/keys?product_id=${bProduct.id}`, { token: a.token })).body).toMatchObject({ data: [], total: 0 })
    const apiKeys = (await h.call('GET', '/v1/api-keys', { token: a.token })).body.data
    expect(apiKeys.map((k: { id: string }) => k.id)).not.toContain(bApiKey.id)
    expect(apiKeys).toHaveLength(1)
    expect((await h.call('GET', '/v1/webhooks', { token: a.token })).body.data).toEqual([])
  })

  test("A cannot create a key on B's product", async () => {
    expectProblem(await h.call('POST', '/v1/keys', { token: a.token, body: { product_id: bProduct.id } }), 404, 'not_found')
    const [{ n }] = await h.node.deps.sql`select count(*)::int as n from license_keys where product_id = ${bProduct.id}`
    expect(n).toBe(1)
  })

  test("A's slugs do not collide with B's", async () => {
    expect((await h.call('POST', '/v1/products', { token: a.token, body: { name: 'mine', slug: 'b-product' } })).status).toBe(201)
  })

  test("validating B's key value with A's token is not_found, and records nothing", async () => {
    const res = await h.call('POST', '/v1/validate', { token: a.token, body: { key: bKey.key_value, device_fingerprint: 'aa'.repeat(32) } })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ valid: false, reason: 'not_found' })
    const deact = await h.call('POST', '/v1/deactivate', { token: a.token, body: { key: bKey.key_value, device_fingerprint: FP } })
    expect(deact.status).toBe(200)
    expect(deact.body.deactivated).toBe(false)
    expect((await h.call('GET', `/v1/keys/${bKey.id}`, { token: b.token })).body.activations).toHaveLength(1)
  })

  test("A's analytics count nothing of B's", async () => {
    const res = await h.call('GET', '/v1/analytics/overview', { token: a.token })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ total_keys: 0, active_keys: 0, total_activations: 0 })
  })

  test("an account's API token is not an operator token, and the operator token is not an API token", async () => {
    expectProblem(await h.call('GET', `/admin/accounts/${b.id}`, { token: a.token }), 401)
    expectProblem(await h.call('GET', '/v1/products', { token: ADMIN_TOKEN }), 401)
  })
})

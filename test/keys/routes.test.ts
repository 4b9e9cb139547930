// Every foundation route's happy path over HTTP, checked field by field against the contract.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { eventsOf, insertActivation } from '../support/helpers'

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const ID = (prefix: string) => new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`)
const KEY_VALUE = /^([0-9A-HJKMNP-TV-Z]{5}-){4}[0-9A-HJKMNP-TV-Z]{5}$/
const inDays = (d: number) => new Date(Date.now() + d * 86_400_000).toISOString()

setDefaultTimeout(30_000) // two shared cores: a slow start is not a failure

let h: Harness
beforeAll(async () => {
  h = await startHarness()
}, 60_000)
afterAll(() => h.close())

describe('operations', () => {
  test('GET /healthz and /readyz', async () => {
    const live = await h.call('GET', '/healthz')
    expect(live.status).toBe(200)
    expect(live.body).toEqual({ status: 'ok' })
    const ready = await h.call('GET', '/readyz')
    expect(ready.status).toBe(200)
    expect(Object.keys(ready.body).sort()).toEqual(['nats', 'postgres', 'redis'])
    for (const v of Object.values(ready.body)) expect(['ok', 'embedded']).toContain(v as string)
  })

  test('X-Request-Id: a sane caller id is echoed, anything else replaced by a generated one', async () => {
    const echoed = await h.call('GET', '/healthz', { headers: { 'x-request-id': 'trace-42.a:b_c' } })
    expect(echoed.headers.get('x-request-id')).toBe('trace-42.a:b_c')
    for (const bad of ['has space', 'x'.repeat(129), 'ünïcode', '<script>']) {
      const res = await h.call('GET', '/healthz', { headers: { 'x-request-id': bad } })
      expect(res.headers.get('x-request-id')).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/)
    }
    const generated = await h.call('GET', '/healthz')
    expect(generated.headers.get('x-request-id')).toMatch(/^req_/)
  })
})

describe('operator', () => {
  test('POST /admin/accounts: plan defaults to free; the first API key is full_access with a token', async () => {
    const res = await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Acme' } })
    expect(res.status).toBe(201)
    const { account, api_key } = res.body
    expect(account).toEqual({ id: expect.stringMatching(ID('acct')), name: 'Acme', plan: 'free', created_at: expect.stringMatching(ISO_MS) })
    expect(api_key).toMatchObject({ id: expect.stringMatching(ID('ak')), scope: 'full_access', created_at: expect.stringMatching(ISO_MS) })
    expect(api_key.token).toMatch(/^kw_[A-Za-z0-9]{32}$/)
    expect(typeof api_key.name).toBe('string')
    const ping = await h.call('GET', '/v1/ping', { token: api_key.token })
    expect(ping.body).toEqual({ status: 'ok', accountId: account.id })
  })

  test('GET /admin/accounts/:id has usage counts; PATCH renames and changes plan (emits account.plan_changed once)', async () => {
    const { id, token } = await h.account('starter')
    const product = await newProduct(h.call, token)
    const k1 = await newKey(h.call, token, product.id)
    await newKey(h.call, token, product.id)
    await h.call('POST', `/v1/keys/${k1.id}/revoke`, { token })
    await insertActivation(h, k1, id)
    const got = await h.call('GET', `/admin/accounts/${id}`, { token: ADMIN_TOKEN })
    expect(got.status).toBe(200)
    expect(got.body).toMatchObject({ id, plan: 'starter', usage: { products: 1, keys: 2, active_keys: 1, activations: 1, api_keys: 1 } })

    const renamed = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { name: 'Renamed' } })
    expect(renamed.status).toBe(200)
    expect(renamed.body).toMatchObject({ id, name: 'Renamed', plan: 'starter' })
    expect(await eventsOf(h, id, 'account.plan_changed')).toHaveLength(0)

    const upgraded = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'enterprise' } })
    expect(upgraded.body).toMatchObject({ id, name: 'Renamed', plan: 'enterprise' })
    const same = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'enterprise' } })
    expect(same.status).toBe(200)
    const events = await eventsOf(h, id, 'account.plan_changed')
    expect(events.map((e) => e.data)).toEqual([{ account_id: id, previous_plan: 'starter', plan: 'enterprise' }])
  })
})

describe('API keys', () => {
  test('GET /v1/ping answers for any scope', async () => {
    const { id, token } = await h.account()
    const res = await h.call('GET', '/v1/ping', { token })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: 'ok', accountId: id })
  })

  test('POST /v1/api-keys → 201 with token, token_prefix and last_used_at null; GET lists them without tokens', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'CI', scope: 'keys:read' } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({
      id: expect.stringMatching(ID('ak')),
      name: 'CI',
      scope: 'keys:read',
      token: expect.stringMatching(/^kw_[A-Za-z0-9]{32}$/),
      token_prefix: created.body.token.slice(0, 7),
      created_at: expect.stringMatching(ISO_MS),
      last_used_at: null,
    })
    const list = await h.call('GET', '/v1/api-keys', { token })
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(2)
    for (const k of list.body.data) {
      expect(k.token).toBeUndefined()
      expect(Object.keys(k).sort()).toEqual(['created_at', 'id', 'last_used_at', 'name', 'scope', 'token_prefix'])
    }
    const { token: _omit, ...withoutToken } = created.body
    expect(list.body.data[1]).toEqual(withoutToken)
  })

  test('last_used_at is recorded (batched) after the key is used', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'used', scope: 'products:read' } })
    await h.call('GET', '/v1/products', { token: created.body.token })
    await h.node.deps.principals.flush()
    const list = await h.call('GET', '/v1/api-keys', { token })
    const used = list.body.data.find((k: { id: string }) => k.id === created.body.id)
    expect(used.last_used_at).toMatch(ISO_MS)
  })

  test('POST /v1/api-keys/:id/rotate: a new token at once; the old one is refused at once', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'rot', scope: 'products:read' } })
    const old = created.body.token
    expect((await h.call('GET', '/v1/products', { token: old })).status).toBe(200)
    const rotated = await h.call('POST', `/v1/api-keys/${created.body.id}/rotate`, { token })
    expect(rotated.status).toBe(200)
    expect(rotated.body).toMatchObject({ id: created.body.id, name: 'rot', scope: 'products:read' })
    expect(rotated.body.token).toMatch(/^kw_[A-Za-z0-9]{32}$/)
    expect(rotated.body.token).not.toBe(old)
    expect(rotated.body.token_prefix).toBe(rotated.body.token.slice(0, 7))
    expect((await h.call('GET', '/v1/products', { token: old })).status).toBe(401)
    expect((await h.call('GET', '/v1/products', { token: rotated.body.token })).status).toBe(200)
  })

  test('DELETE /v1/api-keys/:id → 204, then its token is 401 and it is gone from the list', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'gone', scope: 'validate' } })
    expect((await h.call('GET', '/v1/ping', { token: created.body.token })).status).toBe(200)
    const del = await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })
    expect(del.status).toBe(204)
    expect(del.body).toBeNull()
    expect((await h.call('GET', '/v1/ping', { token: created.body.token })).status).toBe(401)
    const list = await h.call('GET', '/v1/api-keys', { token })
    expect(list.body.data.map((k: { id: string }) => k.id)).not.toContain(created.body.id)
    expect((await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })).status).toBe(404)
  })
})

describe('products', () => {
  test('POST /v1/products → 201 product, emits product.created', async () => {
    const { id, token } = await h.account()
    const res = await h.call('POST', '/v1/products', { token, body: { name: 'Photo Pro', slug: 'photo-pro', description: 'Edits photos' } })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(ID('prod')),
      name: 'Photo Pro',
      slug: 'photo-pro',
      description: 'Edits photos',
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
      active_keys: 0,
      total_activations: 0,
    })
    const events = await eventsOf(h, id, 'product.created')
    expect(events.map((e) => e.data)).toEqual([res.body])
  })

  test('GET /v1/products lists oldest first; GET /v1/products/:id returns one', async () => {
    const { token } = await h.account()
    const a = await newProduct(h.call, token, 'first')
    const b = await newProduct(h.call, token, 'second')
    const list = await h.call('GET', '/v1/products', { token })
    expect(list.status).toBe(200)
    expect(list.body).toEqual({ data: [a, b] })
    const one = await h.call('GET', `/v1/products/${b.id}`, { token })
    expect(one.status).toBe(200)
    expect(one.body).toEqual(b)
  })

  test('active_keys counts effectively active keys; total_activations counts every activation ever', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const active = await newKey(h.call, token, p.id)
    const revoked = await newKey(h.call, token, p.id)
    const lapsed = await newKey(h.call, token, p.id)
    await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token })
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 minute' where id = ${lapsed.id}`
    await insertActivation(h, active, id)
    await insertActivation(h, active, id, { status: 'deactivated' })
    await insertActivation(h, revoked, id)
    const res = await h.call('GET', `/v1/products/${p.id}`, { token })
    expect(res.body).toMatchObject({ active_keys: 1, total_activations: 3 })
  })

  test('PUT /v1/products/:id updates name and description; the same slug is ignored', async () => {
    const { token } = await h.account()
    const p = await newProduct(h.call, token, 'stay')
    const res = await h.call('PUT', `/v1/products/${p.id}`, { token, body: { name: 'New name', description: 'Now described', slug: 'stay' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: p.id, name: 'New name', description: 'Now described', slug: 'stay', created_at: p.created_at })
    expect(res.body.updated_at >= p.updated_at).toBe(true)
    const cleared = await h.call('PUT', `/v1/products/${p.id}`, { token, body: { description: null } })
    expect(cleared.body).toMatchObject({ name: 'New name', description: null })
    const untouched = await h.call('PUT', `/v1/products/${p.id}`, { token, body: {} })
    expect(untouched.status).toBe(200)
    expect(untouched.body).toMatchObject({ name: 'New name', description: null, slug: 'stay' })
  })

  test('DELETE /v1/products/:id → 204 and takes its revoked/expired keys and their activations with it', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const revoked = await newKey(h.call, token, p.id)
    const lapsed = await newKey(h.call, token, p.id)
    await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token })
    await h.node.deps.sql`update license_keys set status = 'expired', expires_at = now() - interval '1 day' where id = ${lapsed.id}`
    await insertActivation(h, revoked, id)
    const del = await h.call('DELETE', `/v1/products/${p.id}`, { token })
    expect(del.status).toBe(204)
    expect(del.body).toBeNull()
    expect((await h.call('GET', `/v1/products/${p.id}`, { token })).status).toBe(404)
    expect((await h.call('GET', `/v1/keys/${revoked.id}`, { token })).status).toBe(404)
    const [{ n }] = await h.node.deps.sql`select count(*)::int as n from activations where product_id = ${p.id}`
    expect(n).toBe(0)
  })
})

describe('license keys', () => {
  test('POST /v1/keys → 201 key object with defaults, key_value once, key_prefix = first 5 characters', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const res = await h.call('POST', '/v1/keys', { token, body: { product_id: p.id } })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(ID('key')),
      product_id: p.id,
      plan: null,
      status: 'active',
      activation_limit: 3,
      activations_used: 0,
      expires_at: null,
      created_at: expect.stringMatching(ISO_MS),
      revoked_at: null,
      revoke_reason: null,
      metadata: {},
      key_prefix: res.body.key_value.slice(0, 5),
      key_value: expect.stringMatching(KEY_VALUE),
    })
    const { key_value, ...key } = res.body
    const events = await eventsOf(h, id, 'key.created')
    expect(events.map((e) => e.data)).toEqual([key])
    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(detail.body.key_value).toBeUndefined()
    expect(JSON.stringify(detail.body)).not.toContain(key_value)
  })

  test('POST /v1/keys with every field', async () => {
    const { token } = await h.account()
    const p = await newProduct(h.call, token)
    const expires = new Date(Date.now() + 30 * 86_400_000)
    const body = { product_id: p.id, plan: 'pro', activation_limit: 10000, expires_at: expires.toISOString().replace('Z', '+00:00'), metadata: { seat: 'A1', n: 2 } }
    const res = await h.call('POST', '/v1/keys', { token, body })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({ plan: 'pro', activation_limit: 10000, expires_at: expires.toISOString(), metadata: { seat: 'A1', n: 2 } })
  })

  test('GET /v1/keys: newest first, paged, filtered by product, status (effective) and plan', async () => {
    const { token } = await h.account()
    const p1 = await newProduct(h.call, token)
    const p2 = await newProduct(h.call, token)
    const k1 = await newKey(h.call, token, p1.id, { plan: 'basic' })
    const k2 = await newKey(h.call, token, p1.id, { plan: 'pro' })
    const k3 = await newKey(h.call, token, p2.id, { plan: 'pro' })
    const k4 = await newKey(h.call, token, p2.id)
    await h.call('POST', `/v1/keys/${k2.id}/revoke`, { token })
    // stored status still active, but past expires_at: effectively expired everywhere
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 second' where id = ${k3.id}`

    const all = await h.call('GET', '/v1/keys', { token })
    expect(all.status).toBe(200)
    expect(all.body).toMatchObject({ page: 0, page_size: 20, total: 4, has_more: false })
    expect(all.body.data.map((k: { id: string }) => k.id)).toEqual([k4.id, k3.id, k2.id, k1.id])
    expect(all.body.data[1].status).toBe('expired')

    const page0 = await h.call('GET', '/v1/keys?page_size=3', { token })
    expect(page0.body).toMatchObject({ page: 0, page_size: 3, total: 4, has_more: true })
    expect(page0.body.data).toHaveLength(3)
    const page1 = await h.call('GET', '/v1/keys?page_size=3&page=1', { token })
    expect(page1.body).toMatchObject({ page: 1, page_size: 3, total: 4, has_more: false })
    expect(page1.body.data.map((k: { id: string }) => k.id)).toEqual([k1.id])
    const beyond = await h.call('GET', '/v1/keys?page=50', { token })
    expect(beyond.body).toMatchObject({ data: [], total: 4, has_more: false })

    const ids = async (q: string) => (await h.call('GET', `/v1/keys?${q}`, { token })).body.data.map((k: { id: string }) => k.id)
    expect(await ids(`product_id=${p1.id}`)).toEqual([k2.id, k1.id])
    expect(await ids('status=active')).toEqual([k4.id, k1.id])
    expect(await ids('status=expired')).toEqual([k3.id])
    expect(await ids('status=revoked')).toEqual([k2.id])
    expect(await ids('plan=pro')).toEqual([k3.id, k2.id])
    expect(await ids(`plan=pro&product_id=${p2.id}&status=expired`)).toEqual([k3.id])
    // an unknown (or malformed) product_id is a filter that matches nothing, not an error
    expect(await ids('product_id=prod_00000000000000000000000000')).toEqual([])
    expect(await ids('product_id=nonsense')).toEqual([])
  })

  test('GET /v1/keys/:id: the key plus its full activation history, oldest first', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id)
    const a1 = await insertActivation(h, key, id, { status: 'deactivated' })
    const a2 = await insertActivation(h, key, id)
    const res = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(res.status).toBe(200)
    const { key_value, ...expected } = key
    expect(res.body).toMatchObject({ ...expected, activations_used: 1 })
    expect(res.body.activations.map((a: { id: string }) => a.id)).toEqual([a1, a2])
    expect(Object.keys(res.body.activations[0]).sort()).toEqual(
      ['activated_at', 'app_version', 'country', 'deactivated_at', 'deactivation_reason', 'device_fingerprint', 'id', 'last_validated_at', 'status'],
    )
    expect(res.body.activations[0]).toMatchObject({ status: 'deactivated', deactivation_reason: 'user', deactivated_at: expect.stringMatching(ISO_MS) })
    expect(res.body.activations[1]).toMatchObject({ status: 'active', deactivated_at: null, deactivation_reason: null })
  })

  test('POST /v1/keys/:id/revoke → 200 revoked with reason; revoking again changes nothing and emits nothing', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id)
    const res = await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'chargeback' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: key.id, status: 'revoked', revoke_reason: 'chargeback', revoked_at: expect.stringMatching(ISO_MS) })
    expect(res.body.key_value).toBeUndefined()
    const again = await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'other' } })
    expect(again.status).toBe(200)
    expect(again.body).toEqual(res.body)
    const events = await eventsOf(h, id, 'key.revoked')
    expect(events.map((e) => e.data)).toEqual([res.body])
    const noBody = await h.call('POST', `/v1/keys/${(await newKey(h.call, token, p.id)).id}/revoke`, { token })
    expect(noBody.status).toBe(200)
    expect(noBody.body).toMatchObject({ status: 'revoked', revoke_reason: null })
  })

  test('POST /v1/keys/:id/extend: new expiry, perpetual with null, an expired key becomes active; emits key.extended', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id, { expires_at: inDays(1) })
    const later = inDays(60)
    const res = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: later } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: key.id, status: 'active', expires_at: later })
    const perpetual = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: null } })
    expect(perpetual.body).toMatchObject({ status: 'active', expires_at: null })

    // expired both by time only and by the sweeper's stored status
    for (const stored of ['active', 'expired']) {
      await h.node.deps.sql`update license_keys set status = ${stored}, expires_at = now() - interval '1 hour' where id = ${key.id}`
      expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('expired')
      const revived = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: later } })
      expect(revived.status).toBe(200)
      expect(revived.body).toMatchObject({ status: 'active', expires_at: later })
    }
    expect(await eventsOf(h, id, 'key.extended')).toHaveLength(4)
  })
})

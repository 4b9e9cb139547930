// GET /v1/events (the audit trail) and `actor` on every event: who made each change, through which door.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { sweepExpiredKeys } from '../../src/modules/keys/expiry-sweeper'
import { ADMIN_TOKEN, fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { startReceiver } from '../webhooks/receiver'
import { LOCAL_DELIVERY, newWebhook } from '../webhooks/helpers'

setDefaultTimeout(60_000)
const h = useHarness({ env: LOCAL_DELIVERY })

const events = (token: string, query = '') => h.call('GET', `/v1/events${query}`, { token })
const apiKeyIdOf = async (token: string) => (await h.call('GET', '/v1/api-keys', { token })).body.data[0].id as string

test('every write through the API emits an event with its actor; filters, paging, order', async () => {
  const { id: accountId, token } = await h.account('growth')
  const me = { type: 'api_key', id: await apiKeyIdOf(token) }
  const validator = await scopedToken(h.call, token, 'validate')

  const product = await newProduct(h.call, token)
  expect((await h.call('PUT', `/v1/products/${product.id}`, { token, body: { name: 'Renamed' } })).status).toBe(200)
  expect((await h.call('PUT', `/v1/products/${product.id}`, { token, body: { name: 'Renamed' } })).status).toBe(200) // no change: no event
  const key = await newKey(h.call, token, product.id, { activation_limit: 2 })
  const device = fingerprint()
  expect((await h.call('POST', '/v1/validate', { token: validator, body: { key: key.key_value, device_fingerprint: device } })).body.valid).toBe(true)
  expect((await h.call('POST', '/v1/deactivate', { token: validator, body: { key: key.key_value, device_fingerprint: device } })).body.deactivated).toBe(true)
  expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
  const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'ci', scope: 'keys:read' } })
  expect(created.status).toBe(201)
  const rotated = await h.call('POST', `/v1/api-keys/${created.body.id}/rotate`, { token })
  expect(rotated.status).toBe(200)
  expect((await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })).status).toBe(204)
  const issued = await h.call('POST', `/admin/accounts/${accountId}/api-keys`, { token: ADMIN_TOKEN, body: { name: 'rescue', scope: 'full_access' } })
  expect(issued.status).toBe(201)
  expect((await h.call('PATCH', `/admin/accounts/${accountId}`, { token: ADMIN_TOKEN, body: { plan: 'enterprise' } })).status).toBe(200)

  const all = await events(token, '?page_size=100')
  expect(all.status).toBe(200)
  const seen = all.body.data.map((e: any) => [e.type, e.actor.type, e.actor.id])
  expect(seen).toEqual([
    ['account.plan_changed', 'operator', null],
    ['api_key.created', 'operator', null],
    ['api_key.deleted', ...Object.values(me)],
    ['api_key.rotated', ...Object.values(me)],
    ['api_key.created', ...Object.values(me)],
    ['key.revoked', ...Object.values(me)],
    ['activation.deactivated', 'device', null],
    ['activation.created', 'device', null],
    ['key.created', ...Object.values(me)],
    ['product.updated', ...Object.values(me)],
    ['product.created', ...Object.values(me)],
    ['api_key.created', ...Object.values(me)], // the validate-scoped key this test made first
  ])
  expect(all.body).toMatchObject({ page: 0, page_size: 100, has_more: false })
  expect(all.body.total).toBe(all.body.data.length)
  for (const e of all.body.data) {
    expect(Object.keys(e).sort()).toEqual(['actor', 'created_at', 'data', 'id', 'type'])
    // secrets and tokens never appear in event data
    const text = JSON.stringify(e.data)
    expect(text).not.toContain(token)
    expect(text).not.toContain(created.body.token)
    expect(text).not.toContain(rotated.body.token)
    expect(text).not.toContain(issued.body.token)
    expect(text).not.toContain(key.key_value)
    expect(e.data.token).toBeUndefined()
  }
  const times = all.body.data.map((e: any) => Date.parse(e.created_at))
  expect(times).toEqual([...times].sort((a, b) => b - a)) // newest first

  // type, resource_id (an activation's events match its key), since (inclusive)
  expect((await events(token, '?type=key.revoked')).body.data.map((e: any) => e.data.id)).toEqual([key.id])
  const aboutKey = (await events(token, `?resource_id=${key.id}`)).body.data.map((e: any) => e.type)
  expect(aboutKey).toEqual(['key.revoked', 'activation.deactivated', 'activation.created', 'key.created'])
  const activationId = all.body.data.find((e: any) => e.type === 'activation.created').data.activation.id
  expect((await events(token, `?resource_id=${activationId}`)).body.data.map((e: any) => e.type)).toEqual(['activation.deactivated', 'activation.created'])
  expect((await events(token, `?resource_id=${product.id}`)).body.data.map((e: any) => e.type)).toEqual(['product.updated', 'product.created'])
  expect((await events(token, `?resource_id=${created.body.id}`)).body.data.map((e: any) => e.type)).toEqual(['api_key.deleted', 'api_key.rotated', 'api_key.created'])
  const revokedAt = all.body.data.find((e: any) => e.type === 'key.revoked').created_at
  const since = await events(token, `?since=${encodeURIComponent(revokedAt)}&page_size=100`)
  expect(since.body.data.at(-1).type).toBe('key.revoked')
  expect(since.body.data.every((e: any) => e.created_at >= revokedAt)).toBe(true)

  // paging: the same order, page by page
  const pages = []
  for (let page = 0; ; page++) {
    const res = await events(token, `?page=${page}&page_size=3`)
    expect(res.body.total).toBe(all.body.total)
    pages.push(...res.body.data.map((e: any) => e.id))
    if (!res.body.has_more) break
  }
  expect(pages).toEqual(all.body.data.map((e: any) => e.id))
})

test('webhooks: created, updated (only on a change), deleted; the payload carries actor; no secret in data', async () => {
  const receiver = startReceiver()
  try {
    const { token } = await h.account('growth')
    const me = { type: 'api_key', id: await apiKeyIdOf(token) }
    const hook = await newWebhook(h.call, token, receiver.url('/all'), ['product.created', 'key.created'])
    receiver.expect('/all', hook.secret)
    const other = await newWebhook(h.call, token, receiver.url('/other'), ['key.expired'])
    expect((await h.call('PATCH', `/v1/webhooks/${other.id}`, { token, body: { is_active: false } })).status).toBe(200)
    expect((await h.call('PATCH', `/v1/webhooks/${other.id}`, { token, body: { is_active: false } })).status).toBe(200)
    expect((await h.call('DELETE', `/v1/webhooks/${other.id}`, { token })).status).toBe(204)
    const product = await newProduct(h.call, token)
    await receiver.waitFor((all) => all.some((r) => r.payload?.type === 'product.created'), 15_000, 'product.created')
    const delivered = receiver.on('/all').find((r) => r.payload?.type === 'product.created')!
    expect(delivered.payload).toMatchObject({ type: 'product.created', actor: me, data: { id: product.id } })

    const list = (await events(token, '?page_size=100')).body.data
    expect(list.map((e: any) => [e.type, e.data.id])).toEqual([
      ['product.created', product.id],
      ['webhook.deleted', other.id],
      ['webhook.updated', other.id],
      ['webhook.created', other.id],
      ['webhook.created', hook.id],
    ])
    for (const e of list) {
      expect(e.actor).toEqual(me)
      expect(JSON.stringify(e.data)).not.toContain(hook.secret)
      expect(JSON.stringify(e.data)).not.toContain(other.secret)
      expect(e.data.secret).toBeUndefined()
    }
    // deleting a product: product.deleted with the product as it was
    expect((await h.call('DELETE', `/v1/products/${product.id}`, { token })).status).toBe(204)
    expect((await events(token, '?type=product.deleted')).body.data.map((e: any) => [e.data.slug, e.actor])).toEqual([[product.slug, me]])
  } finally {
    await receiver.stop()
  }
})

test('the system expires keys; admins removing a device act as their API key', async () => {
  const { token } = await h.account('growth')
  const me = { type: 'api_key', id: await apiKeyIdOf(token) }
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { expires_at: new Date(Date.now() + 1_000).toISOString() })
  const res = await h.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fingerprint() } })
  expect(res.body.valid).toBe(true)
  const activationId = (await events(token, '?type=activation.created')).body.data[0].data.activation.id
  expect((await h.call('DELETE', `/v1/keys/${key.id}/activations/${activationId}`, { token })).status).toBe(200)
  await Bun.sleep(1_100)
  await sweepExpiredKeys(h.node.deps.sql)
  const list = (await events(token, `?resource_id=${key.id}`)).body.data
  expect(list.map((e: any) => [e.type, e.actor])).toEqual([
    ['key.expired', { type: 'system', id: null }],
    ['activation.deactivated', me],
    ['activation.created', { type: 'device', id: null }],
    ['key.created', me],
  ])
})

test('isolation between accounts, full_access only, bad queries are 400', async () => {
  const a = await h.account('growth')
  const b = await h.account('growth')
  const productOfA = await newProduct(h.call, a.token)
  expect((await events(b.token)).body).toEqual({ data: [], page: 0, page_size: 20, total: 0, has_more: false })
  expect((await events(b.token, `?resource_id=${productOfA.id}`)).body.total).toBe(0)
  expect((await events(a.token)).body.total).toBe(1)
  for (const scope of ['validate', 'keys:read', 'keys:write', 'products:read', 'analytics:read', 'offline:write']) {
    const res = await events(await scopedToken(h.call, a.token, scope))
    expect({ scope, status: res.status }).toEqual({ scope, status: 403 })
  }
  expect((await h.call('GET', '/v1/events')).status).toBe(401)
  for (const bad of ['?type=nope', '?since=yesterday', '?page=-1', '?page_size=0', '?page_size=101']) {
    const res = await events(a.token, bad)
    expect({ bad, status: res.status }).toEqual({ bad, status: 400 })
  }
})

// The webhook routes: shapes, validation, plan limits, idempotency, secrets at rest, scopes.
import { expect, test } from 'bun:test'
import { SCOPES } from '../../src/core/scopes'
import { scopedToken, useHarness } from '../support/harness'
import { ALL_EVENTS, newWebhook } from './helpers'

const h = useHarness({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }, socket: false })

const URL_ = 'http://127.0.0.1:9/hook'
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

test('create shows the secret once; list and get never do', async () => {
  const { token } = await h.account('growth')
  const created = await h.call('POST', '/v1/webhooks', { token, body: { url: URL_, events: ['key.created', 'key.revoked'] } })
  expect(created.status).toBe(201)
  expect(Object.keys(created.body).sort()).toEqual(['created_at', 'events', 'id', 'is_active', 'secret', 'updated_at', 'url'])
  expect(created.body).toMatchObject({ url: URL_, events: ['key.created', 'key.revoked'], is_active: true })
  expect(created.body.id).toMatch(/^wh_[0-9A-HJKMNP-TV-Z]{26}$/)
  expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
  expect(Buffer.from(created.body.secret.slice(6), 'base64')).toHaveLength(32)
  expect(created.body.created_at).toMatch(TIMESTAMP)

  const list = await h.call('GET', '/v1/webhooks', { token })
  expect(list.status).toBe(200)
  const { secret: _secret, ...webhook } = created.body
  expect(list.body).toEqual({ data: [webhook] })

  const detail = await h.call('GET', `/v1/webhooks/${webhook.id}`, { token })
  expect(detail.status).toBe(200)
  expect(detail.body).toEqual({ ...webhook, deliveries: [] })
})

test('the secret is stored only encrypted (webhooks table and idempotency records)', async () => {
  const { token } = await h.account('growth')
  const created = await h.call('POST', '/v1/webhooks', {
    token,
    body: { url: URL_, events: ['key.created'] },
    headers: { 'idempotency-key': 'secret-at-rest' },
  })
  expect(created.status).toBe(201)
  const secret: string = created.body.secret
  const base64Part = secret.slice('whsec_'.length)
  const sql = h.node.deps.sql
  const tables = ['webhooks', 'idempotency_keys', 'webhook_deliveries', 'webhook_attempts', 'webhook_successes']
  for (const table of tables) {
    const [{ n }] = await sql`select count(*)::int as n from ${sql(table)} t where t::text like ${`%${base64Part}%`}`
    expect(n).toBe(0)
  }
  const [{ sealed }] = await sql`select secret_sealed as sealed from webhooks where id = ${created.body.id}`
  expect(sealed).toMatch(/^v1\./)
})

test('events: non-empty, known types only, duplicates ignored', async () => {
  const { token } = await h.account('growth')
  for (const events of [[], ['key.created', 'key.deleted'], ['*'], 'key.created', [1]]) {
    const res = await h.call('POST', '/v1/webhooks', { token, body: { url: URL_, events } })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe('invalid_request')
    expect(res.body.errors[0].field).toStartWith('body.events')
  }
  const missing = await h.call('POST', '/v1/webhooks', { token, body: { url: URL_ } })
  expect(missing.status).toBe(400)
  const dup = await newWebhook(h.call, token, URL_, ['key.created', 'key.created', 'product.created'])
  expect(dup.events).toEqual(['key.created', 'product.created'])
  const all = await newWebhook(h.call, token, URL_, ALL_EVENTS)
  expect(all.events).toEqual(ALL_EVENTS)
})

test('url: http or https, absolute, at most 2048 characters', async () => {
  const { token } = await h.account('growth')
  for (const url of ['ftp://example.com/x', 'file:///etc/passwd', 'javascript:alert(1)', 'example.com/hook', '/relative', '',
    `http://example.com/${'a'.repeat(2040)}`, 'http://', 'gopher://127.0.0.1:25/']) {
    const res = await h.call('POST', '/v1/webhooks', { token, body: { url, events: ['key.created'] } })
    expect(res.status, url).toBe(400)
    expect(res.body.errors[0].field).toBe('body.url')
  }
  const https = await h.call('POST', '/v1/webhooks', { token, body: { url: 'https://127.0.0.1:8443/x?y=1', events: ['key.created'] } })
  expect(https.status).toBe(201)
})

test('plan limits: free has none, hobby three (402 beyond)', async () => {
  const free = await h.account('free')
  const refused = await h.call('POST', '/v1/webhooks', { token: free.token, body: { url: URL_, events: ['key.created'] } })
  expect(refused.status).toBe(402)
  expect(refused.body.code).toBe('plan_limit_reached')

  const hobby = await h.account('hobby')
  const results = await Promise.all(
    Array.from({ length: 5 }, () => h.call('POST', '/v1/webhooks', { token: hobby.token, body: { url: URL_, events: ['key.created'] } })),
  )
  expect(results.map((r) => r.status).sort()).toEqual([201, 201, 201, 402, 402])
  expect((await h.call('GET', '/v1/webhooks', { token: hobby.token })).body.data).toHaveLength(3)
})

test('Idempotency-Key replays the same webhook and secret; another body is 409', async () => {
  const { token } = await h.account('growth')
  const send = (events: string[]) =>
    h.call('POST', '/v1/webhooks', { token, body: { url: URL_, events }, headers: { 'idempotency-key': 'wh-1' } })
  const first = await send(['key.created'])
  const again = await send(['key.created'])
  expect(first.status).toBe(201)
  expect(again.status).toBe(201)
  expect(again.body).toEqual(first.body)
  expect(again.headers.get('idempotent-replayed')).toBe('true')
  expect((await h.call('GET', '/v1/webhooks', { token })).body.data).toHaveLength(1)
  const other = await send(['key.revoked'])
  expect(other.status).toBe(409)
  expect(other.body.code).toBe('idempotency_key_reused')
})

test('patch url, events and is_active; unknown fields ignored', async () => {
  const { token } = await h.account('growth')
  const wh = await newWebhook(h.call, token, URL_, ['key.created'])
  await Bun.sleep(5)
  const patched = await h.call('PATCH', `/v1/webhooks/${wh.id}`, {
    token,
    body: { url: 'http://127.0.0.1:10/other', events: ['product.created', 'product.created'], is_active: false, secret: 'x' },
  })
  expect(patched.status).toBe(200)
  expect(patched.body).toMatchObject({ id: wh.id, url: 'http://127.0.0.1:10/other', events: ['product.created'], is_active: false })
  expect(patched.body.secret).toBeUndefined()
  expect(patched.body.updated_at > patched.body.created_at).toBe(true)

  const partial = await h.call('PATCH', `/v1/webhooks/${wh.id}`, { token, body: { is_active: true } })
  expect(partial.body).toMatchObject({ url: 'http://127.0.0.1:10/other', events: ['product.created'], is_active: true })
  const empty = await h.call('PATCH', `/v1/webhooks/${wh.id}`, { token, body: {} })
  expect(empty.status).toBe(200)
  expect(empty.body.events).toEqual(['product.created'])

  for (const body of [{ events: [] }, { events: ['nope'] }, { url: 'ftp://x/' }, { is_active: 'yes' }, { url: null }]) {
    const bad = await h.call('PATCH', `/v1/webhooks/${wh.id}`, { token, body })
    expect(bad.status, JSON.stringify(body)).toBe(400)
  }
})

test('delete is 204, then the webhook is gone', async () => {
  const { token } = await h.account('growth')
  const wh = await newWebhook(h.call, token, URL_)
  const del = await h.call('DELETE', `/v1/webhooks/${wh.id}`, { token })
  expect(del.status).toBe(204)
  expect(del.body).toBeNull()
  for (const [method, path] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/test']] as const) {
    const res = await h.call(method, `/v1/webhooks/${wh.id}${path}`, { token, body: method === 'PATCH' ? {} : undefined })
    expect(res.status).toBe(404)
  }
})

test('unknown, malformed and other accounts\' ids are 404', async () => {
  const a = await h.account('growth')
  const b = await h.account('growth')
  const theirs = await newWebhook(h.call, b.token, URL_)
  for (const id of [theirs.id, 'wh_00000000000000000000000000', 'wh_nope', 'key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I', '%00', 'x'.repeat(300)]) {
    for (const [method, path] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/test']] as const) {
      const res = await h.call(method, `/v1/webhooks/${encodeURIComponent(id)}${path}`, { token: a.token, body: method === 'PATCH' ? {} : undefined })
      expect(res.status, `${method} ${id}${path}`).toBe(404)
      expect(res.body.code).toBe('not_found')
    }
  }
  expect((await h.call('GET', '/v1/webhooks', { token: a.token })).body.data).toEqual([])
  expect((await h.call('GET', `/v1/webhooks/${theirs.id}`, { token: b.token })).status).toBe(200)
})

test('only full_access may use the webhook routes; no token is 401', async () => {
  const { token } = await h.account('growth')
  const wh = await newWebhook(h.call, token, URL_)
  const routes = [
    ['POST', '/v1/webhooks', { url: URL_, events: ['key.created'] }],
    ['GET', '/v1/webhooks', undefined],
    ['GET', `/v1/webhooks/${wh.id}`, undefined],
    ['PATCH', `/v1/webhooks/${wh.id}`, { is_active: false }],
    ['DELETE', `/v1/webhooks/${wh.id}`, undefined],
    ['POST', `/v1/webhooks/${wh.id}/test`, undefined],
  ] as const
  for (const scope of SCOPES.filter((s) => s !== 'full_access')) {
    const scoped = await scopedToken(h.call, token, scope)
    for (const [method, path, body] of routes) {
      const res = await h.call(method, path, { token: scoped, body })
      expect(res.status, `${scope} ${method} ${path}`).toBe(403)
      expect(res.body.code).toBe('insufficient_scope')
    }
  }
  for (const [method, path, body] of routes) {
    const res = await h.call(method, path, { token: null, body })
    expect(res.status).toBe(401)
  }
  expect((await h.call('GET', `/v1/webhooks/${wh.id}`, { token })).body.is_active).toBe(true)
})

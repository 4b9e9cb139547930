// Routing follows the request's path whatever its Host header: short (`x`), empty, missing (HTTP/1.0),
// odd (`a/b`, `u@h`, IPv6 literal), or a request target in absolute form. Raw HTTP over a real port, since
// fetch cannot send such Host headers and app.handle() does not go through the server.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { rawRequest, type RawReply } from '../support/raw-http'

let h: Harness
let port: number
let account: { id: string; token: string }
let keyValue: string
let keyId: string
const FP = 'ab'.repeat(32)
beforeAll(async () => {
  h = await startHarness()
  port = Number(new URL(h.node.url).port)
  account = await h.account('growth')
  const product = await newProduct(h.call, account.token)
  const key = await newKey(h.call, account.token, product.id)
  keyValue = key.key_value
  keyId = key.id
}, 60_000)
afterAll(() => h.close())

/** Host header lines to try: none of them may change which route answers. */
const HOSTS: Record<string, string[]> = {
  'a one-letter Host': ['Host: x'],
  'a two-letter Host with a port': ['Host: ab:1'],
  'an empty Host': ['Host: '],
  'a Host with a slash': ['Host: a/b'],
  'a Host with a query mark': ['Host: a?b'],
  'a Host with userinfo': ['Host: u@h'],
  'a Host with spaces': ['Host: a very long host name'],
  'an IPv6 literal Host': ['Host: [::1]:80'],
  'the usual Host': ['Host: localhost'],
}

function send(method: string, target: string, hostLines: string[], opts: { token?: string; body?: unknown; version?: string } = {}) {
  const head = [`${method} ${target} HTTP/${opts.version ?? '1.1'}`, ...hostLines]
  if (opts.token) head.push(`Authorization: Bearer ${opts.token}`)
  const body = opts.body === undefined ? '' : JSON.stringify(opts.body)
  if (body) head.push('Content-Type: application/json')
  return rawRequest(port, head, body)
}

function expectNotFound(res: RawReply, what: string) {
  expect(res.status, what).toBe(404)
  expect(res.headers['content-type'], what).toContain('application/problem+json')
  expect(res.body.code, what).toBe('not_found')
}

describe.each(Object.entries(HOSTS))('with %s', (_name, hostLines) => {
  test('a prefixed path is not found, however the Host shifts the URL', async () => {
    for (const target of ['/ab/v1/products', '/a/v1/products', '/abc/v1/products', '/xyzxyz/v1/products', '/v1/v1/products', '//v1/products']) {
      expectNotFound(await send('GET', target, hostLines, { token: account.token }), target)
    }
    expectNotFound(await send('GET', `/ab/admin/accounts/${account.id}`, hostLines, { token: ADMIN_TOKEN }), 'admin')
    expectNotFound(await send('GET', `/abcdefg/admin/accounts/${account.id}`, hostLines, { token: ADMIN_TOKEN }), 'admin, longer prefix')
    expectNotFound(await send('POST', '/ab/v1/validate', hostLines, { token: account.token, body: { key: keyValue, device_fingerprint: FP } }), 'validate')
  })

  test('the real paths answer, with and without a trailing slash', async () => {
    const list = await send('GET', '/v1/products', hostLines, { token: account.token })
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(1)
    expect((await send('GET', '/v1/products/', hostLines, { token: account.token })).body).toEqual(list.body)
    const admin = await send('GET', `/admin/accounts/${account.id}`, hostLines, { token: ADMIN_TOKEN })
    expect(admin.status).toBe(200)
    expect(admin.body.id).toBe(account.id)
    expect((await send('GET', `/admin/accounts/${account.id}/`, hostLines, { token: ADMIN_TOKEN })).body.id).toBe(account.id)
    // the query is the query, even when it holds a slash
    const bad = await send('GET', '/v1/keys?status=a/b/c/d/e', hostLines, { token: account.token })
    expect(bad.status).toBe(400)
    expect(bad.body.errors[0].field).toMatch(/^query/)
    const keys = await send('GET', '/v1/keys?status=active&page_size=1', hostLines, { token: account.token })
    expect(keys.status).toBe(200)
    expect(keys.body.data.map((k: { id: string }) => k.id)).toEqual([keyId])
  })

  test('validate answers the same through Bun\'s router (fast path) and the framework (trailing slash)', async () => {
    const body = { key: keyValue, device_fingerprint: FP }
    const fast = await send('POST', '/v1/validate', hostLines, { token: account.token, body })
    expect(fast.status).toBe(200)
    expect(fast.body.valid).toBe(true)
    const slash = await send('POST', '/v1/validate/', hostLines, { token: account.token, body })
    expect(slash.status).toBe(200)
    expect(slash.body).toEqual(fast.body)
  })

  test('a create with a body goes through', async () => {
    const slug = `r-${Math.random().toString(36).slice(2, 10)}`
    const res = await send('POST', '/v1/products', hostLines, { token: account.token, body: { name: slug, slug } })
    expect(res.status).toBe(201)
    expect(res.body.slug).toBe(slug)
    expect((await send('DELETE', `/v1/products/${res.body.id}`, hostLines, { token: account.token })).status).toBe(204)
  })
})

test('HTTP/1.0 without a Host header routes on the path', async () => {
  expectNotFound(await send('GET', '/ab/v1/products', [], { token: account.token, version: '1.0' }), 'prefixed')
  expect((await send('GET', '/v1/products', [], { token: account.token, version: '1.0' })).status).toBe(200)
  const fast = await send('POST', '/v1/validate', [], { token: account.token, version: '1.0', body: { key: keyValue, device_fingerprint: FP } })
  expect(fast.status).toBe(200)
  expect(fast.body.valid).toBe(true)
})

test('a chunked body (no Content-Length) survives the rewrite, and its size limit still holds', async () => {
  const slug = `c-${Math.random().toString(36).slice(2, 10)}`
  const json = JSON.stringify({ name: slug, slug })
  const chunked = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`
  const head = ['POST /v1/products HTTP/1.1', 'Host: x', `Authorization: Bearer ${account.token}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked']
  const res = await rawRequest(port, head, chunked(json))
  expect(res.status).toBe(201)
  expect(res.body.slug).toBe(slug)
  const huge = await rawRequest(port, head, chunked(JSON.stringify({ name: 'x'.repeat(70_000), slug: 'huge' })))
  expect(huge.status).toBe(413)
  expect((await send('DELETE', `/v1/products/${res.body.id}`, ['Host: x'], { token: account.token })).status).toBe(204)
})

test('a request target in absolute form routes on its path', async () => {
  expectNotFound(await send('GET', 'http://x/ab/v1/products', ['Host: x'], { token: account.token }), 'prefixed')
  expect((await send('GET', 'http://x/v1/products', ['Host: x'], { token: account.token })).status).toBe(200)
})

test('the request id, the access log route and the 404 envelope are unchanged for a rewritten request', async () => {
  const res = await send('GET', '/nope', ['Host: x', 'X-Request-Id: req-routing-1'], { token: account.token })
  expectNotFound(res, '/nope')
  expect(res.headers['x-request-id']).toBe('req-routing-1')
  expect(res.body.request_id).toBe('req-routing-1')
})

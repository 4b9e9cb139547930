// "No input may produce a 500": hostile and sloppy input on every foundation route answers 4xx
// problem+json (with `errors` on 400), or a 2xx when the input is in fact acceptable.
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, useHarness } from '../support/harness'
import { expectNoServerError, expectProblem } from '../support/helpers'

setDefaultTimeout(60_000)

const h = useHarness()
let token: string
let productId: string
let keyId: string
let accountId: string
beforeAll(async () => {
  ;({ id: accountId, token } = await h.account('enterprise'))
  productId = (await newProduct(h.call, token)).id
  keyId = (await newKey(h.call, token, productId)).id
}, 60_000)

/** Values that are wrong, odd or hostile for almost any field. */
const NASTY: unknown[] = [
  null,
  0,
  -1,
  1.5,
  1e308,
  -0,
  true,
  '',
  ' ',
  '5',
  'null',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '😀'.repeat(50),
  '\u202eevil',
  'Ω≈ç√∫˜µ≤≥÷',
  "'; drop table accounts; --",
  '${7*7}{{7*7}}',
  '../../etc/passwd',
  'x'.repeat(10_000),
  [],
  ['a'],
  {},
  { nested: { deeper: [1, { x: null }] } },
  { __proto__: { polluted: true } },
]

const BODY_ROUTES = () => [
  { method: 'POST', path: '/v1/products', fields: ['name', 'slug', 'description'], base: { name: 'n', slug: 's' } },
  { method: 'PUT', path: `/v1/products/${productId}`, fields: ['name', 'description', 'slug'], base: {} },
  { method: 'POST', path: '/v1/keys', fields: ['product_id', 'plan', 'activation_limit', 'expires_at', 'metadata'], base: { product_id: productId } },
  { method: 'POST', path: `/v1/keys/${keyId}/extend`, fields: ['expires_at'], base: { expires_at: null } },
  { method: 'POST', path: '/v1/api-keys', fields: ['name', 'scope'], base: { name: 'n', scope: 'validate' } },
  { method: 'PATCH', path: `/admin/accounts/${accountId}`, fields: ['name', 'plan'], base: {}, admin: true },
  { method: 'POST', path: '/admin/accounts', fields: ['name', 'plan'], base: { name: 'n' }, admin: true },
]

describe('bodies', () => {
  test('every field of every body route, set to every nasty value: never a 5xx', async () => {
    let n = 0
    for (const route of BODY_ROUTES()) {
      for (const field of route.fields) {
        for (const value of NASTY) {
          const body = { ...route.base, [field]: value }
          const res = await h.call(route.method, route.path, { token: route.admin ? ADMIN_TOKEN : token, body })
          expectNoServerError(res, `${route.method} ${route.path} ${field}=${JSON.stringify(value)?.slice(0, 40)}`)
          n++
        }
      }
    }
    expect(n).toBeGreaterThan(400)
  })

  test('whole bodies that are not objects, not JSON or not UTF-8 are 400', async () => {
    const raws = ['null', '[]', '[{"name":"x","slug":"x"}]', '"text"', '42', 'true', '{', '{"a":1,}', "{'a':1}", 'NaN', '{"a":1}{"b":2}', '\u0000']
    for (const route of BODY_ROUTES()) {
      for (const raw of raws) {
        const res = await h.call(route.method, route.path, { token: route.admin ? ADMIN_TOKEN : token, raw, headers: { 'content-type': 'application/json' } })
        expectProblem(res, 400, 'invalid_request')
      }
      const latin1 = await fetch(h.node.url + route.path, {
        method: route.method,
        headers: { authorization: `Bearer ${route.admin ? ADMIN_TOKEN : token}`, 'content-type': 'application/json' },
        body: new Uint8Array([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xe9, 0xff, 0x22, 0x7d]), // {"n":"\xe9\xff"}
      })
      expectProblem({ status: latin1.status, headers: latin1.headers, body: await latin1.json() }, 400)
    }
  })

  test('NUL anywhere in a body is 400 naming the field, including inside metadata keys', async () => {
    const res = await h.call('POST', '/v1/keys', { token, body: { product_id: productId, metadata: { ok: ['fine', 'bad\u0000'] } } })
    expect(expectProblem(res, 400).errors[0].field).toBe('body.metadata.ok.1')
    const key = await h.call('POST', '/v1/keys', { token, body: { product_id: productId, metadata: { 'k\u0000': 1 } } })
    expectProblem(key, 400)
  })

  test('deeply nested and very large JSON inside the limit', async () => {
    const deep = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)
    for (const depth of [100, 5_000, 13_000]) {
      const raw = `{"product_id":"${productId}","metadata":${deep(depth)}}`
      expectNoServerError(await h.call('POST', '/v1/keys', { token, raw }), `metadata depth ${depth}`)
    }
    const arrays = `{"product_id":"${productId}","metadata":{"a":${'['.repeat(30_000)}${']'.repeat(30_000)}}}`
    expectNoServerError(await h.call('POST', '/v1/keys', { token, raw: arrays }), 'nested arrays')
    const manyKeys = JSON.stringify({ product_id: productId, metadata: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, i])) })
    expectProblem(await h.call('POST', '/v1/keys', { token, raw: manyKeys }), 400) // over 8 KiB serialized
    const wide = JSON.stringify({ name: 'w', slug: 'wide', ...Object.fromEntries(Array.from({ length: 4000 }, (_, i) => [`f${i}`, i])) })
    expectNoServerError(await h.call('POST', '/v1/products', { token, raw: wide }), 'many unknown fields')
  })

  test('over 64 KiB: 413 with or without content-length; a lying content-length does not crash', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(70_000), slug: 'x' })
    expectProblem(await h.call('POST', '/v1/products', { token, raw: big }), 413, 'payload_too_large')
    const chunked = await fetch(`${h.node.url}/v1/products`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: new Blob([big]).stream(),
    })
    expectProblem({ status: chunked.status, headers: chunked.headers, body: await chunked.json() }, 413, 'payload_too_large')
    for (const cl of ['99999999999', 'abc', '-5']) {
      const res = await h.call('POST', '/v1/products', { token, raw: '{"name":"a","slug":"cl"}', headers: { 'content-length': cl } }).catch(() => null)
      // fetch may refuse to send a nonsense content-length at all; if it does go out, no 5xx
      if (res) expectNoServerError(res, `content-length ${cl}`)
    }
  })
})

describe('query parameters and ids', () => {
  test('bad list parameters are 400 with errors naming the query', async () => {
    const bad = [
      'page_size=101', 'page_size=0', 'page_size=-5', 'page_size=abc', 'page_size=1.5', 'page_size=',
      'page=-1', 'page=abc', 'page=1e400', 'page=99999999999999999999', 'page=NaN', 'page=Infinity',
      'status=foo', 'status=ACTIVE', 'status=', `plan=${'p'.repeat(65)}`, 'product_id=%00', 'plan=a%00b',
    ]
    for (const q of bad) {
      const problem = expectProblem(await h.call('GET', `/v1/keys?${q}`, { token }), 400, 'invalid_request')
      expect(problem.errors[0].field).toMatch(/^query/)
    }
  })

  test('odd but harmless query strings are not errors', async () => {
    for (const q of ['', 'unknown=1', 'page=0&page_size=100', 'status[]=active', 'page[a]=1', 'product_id=%E2%80%AE', 'plan=%F0%9F%98%80', '&&&', '=x', 'product_id=%ZZ']) {
      const res = await h.call('GET', `/v1/keys?${q}`, { token })
      expectNoServerError(res, `GET /v1/keys?${q}`)
    }
  })

  test('malformed ids in paths are 404 on every :id route', async () => {
    const ids = ['%00', '%ZZ', '%E2%80%AE', '..%2F..%2Fetc', 'prod_' + '0'.repeat(25), `${productId}x`, productId.toLowerCase(), 'x'.repeat(2000), "'%20or%201=1--"]
    const routes = (id: string) => [
      ['GET', `/v1/products/${id}`],
      ['PUT', `/v1/products/${id}`],
      ['DELETE', `/v1/products/${id}`],
      ['GET', `/v1/keys/${id}`],
      ['POST', `/v1/keys/${id}/revoke`],
      ['POST', `/v1/keys/${id}/extend`],
      ['POST', `/v1/api-keys/${id}/rotate`],
      ['DELETE', `/v1/api-keys/${id}`],
      ['GET', `/admin/accounts/${id}`],
      ['PATCH', `/admin/accounts/${id}`],
    ]
    for (const id of ids) {
      for (const [method, path] of routes(id)) {
        const admin = path.startsWith('/admin')
        const body = method === 'POST' && path.endsWith('/extend') ? { expires_at: null } : undefined
        const res = await h.call(method, path, { token: admin ? ADMIN_TOKEN : token, body })
        expectProblem(res, 404, 'not_found')
      }
    }
  })

  test('odd headers: huge or unicode Authorization, odd Idempotency-Key, odd X-Request-Id', async () => {
    for (const auth of [`Bearer ${'k'.repeat(8000)}`, 'Bearer kw_ÄÖÜ', 'Bearer \t', `Bearer ${token} ${token}`]) {
      expectProblem(await h.call('GET', '/v1/products', { headers: { authorization: auth } }), 401)
    }
    for (const key of ['ÄÖÜ', ' ', 'x'.repeat(255), '../../']) {
      const res = await h.call('POST', '/v1/api-keys', { token, headers: { 'idempotency-key': key }, body: { name: 'i', scope: 'validate' } })
      expectNoServerError(res, `idempotency-key ${key.slice(0, 10)}`)
    }
    const res = await h.call('GET', '/v1/products', { token, headers: { 'x-request-id': 'x'.repeat(5000) } })
    expect(res.status).toBe(200)
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  })
})

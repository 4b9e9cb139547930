// Every error status of the contract's table that the HTTP layer produces, as problem+json: field
// errors, authentication, scopes, unknown routes and ids, idempotency, the body limit, 5xx. The
// refusals that belong to one module are tested with its routes (test/<module>/routes.test.ts).
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problemResponse, statusOf } from '../../src/http/errors'
import { toAppError } from '../../src/http/kernel'
import { createLogger } from '../../src/infra/log'
import { ADMIN_TOKEN, newProduct, scopedToken, useHarness } from '../support/harness'
import { expectProblem, ghostId } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

describe('400 invalid_request', () => {
  test('malformed JSON, wrong types, out-of-range and unknown enum values name the field', async () => {
    const { token } = await h.account()
    const p = await newProduct(h.call, token)
    const cases: [string, string, { body?: unknown; raw?: string }, string][] = [
      ['POST', '/v1/products', { raw: '{"name": "x",' }, 'body'],
      ['POST', '/v1/products', { body: { name: 5, slug: 'ok' } }, 'body.name'],
      ['POST', '/v1/products', { body: { name: '', slug: 'ok' } }, 'body.name'],
      ['POST', '/v1/products', { body: { name: 'x'.repeat(201), slug: 'ok' } }, 'body.name'],
      ['POST', '/v1/products', { body: { name: 'ok', slug: 'Not A Slug' } }, 'body.slug'],
      ['POST', '/v1/products', { body: { name: 'ok', slug: 'a--b' } }, 'body.slug'],
      ['POST', '/v1/products', { body: { name: 'ok', slug: 'a'.repeat(65) } }, 'body.slug'],
      ['POST', '/v1/products', { body: { name: 'ok', slug: 'ok', description: 'd'.repeat(2001) } }, 'body.description'],
      ['PUT', `/v1/products/${p.id}`, { body: { slug: 'another-slug' } }, 'body.slug'],
      ['PUT', `/v1/products/${p.id}`, { body: { name: null } }, 'body.name'],
      ['POST', '/v1/keys', { body: {} }, 'body.product_id'],
      ['POST', '/v1/keys', { body: { product_id: p.id, activation_limit: 0 } }, 'body.activation_limit'],
      ['POST', '/v1/keys', { body: { product_id: p.id, activation_limit: 10001 } }, 'body.activation_limit'],
      ['POST', '/v1/keys', { body: { product_id: p.id, activation_limit: '3' } }, 'body.activation_limit'],
      ['POST', '/v1/keys', { body: { product_id: p.id, plan: 'p'.repeat(65) } }, 'body.plan'],
      ['POST', '/v1/keys', { body: { product_id: p.id, expires_at: '2020-01-01T00:00:00Z' } }, 'body.expires_at'],
      ['POST', '/v1/keys', { body: { product_id: p.id, expires_at: '2099-01-01T00:00:00' } }, 'body.expires_at'],
      ['POST', '/v1/keys', { body: { product_id: p.id, expires_at: '2099-02-30T00:00:00Z' } }, 'body.expires_at'],
      ['POST', '/v1/keys', { body: { product_id: p.id, metadata: ['not', 'an', 'object'] } }, 'body.metadata'],
      ['POST', '/v1/keys', { body: { product_id: p.id, metadata: { big: 'm'.repeat(8200) } } }, 'body.metadata'],
      ['POST', '/v1/api-keys', { body: { name: 'x', scope: 'admin' } }, 'body.scope'],
      ['POST', '/v1/api-keys', { body: { scope: 'validate' } }, 'body.name'],
    ]
    for (const [method, path, opts, field] of cases) {
      const res = await h.call(method, path, { token, ...opts })
      const problem = expectProblem(res, 400, 'invalid_request')
      if (!problem.errors.some((e: { field: string }) => e.field === field)) {
        throw new Error(`${method} ${path} ${JSON.stringify(opts).slice(0, 80)}: no error for ${field} in ${JSON.stringify(problem.errors)}`)
      }
    }
  })

  test('an unknown enum value names the accepted values', async () => {
    const { token } = await h.account('growth')
    const res = await h.call('POST', '/v1/api-keys', { token, body: { name: 'x', scope: 'everything' } })
    expect(res.status).toBe(400)
    expect(res.body.errors[0].field).toBe('body.scope')
    expect(res.body.errors[0].message).toContain('must be one of: full_access, validate, keys:read')
  })
})

describe('401 unauthorized', () => {
  test('missing, malformed, unknown and revoked tokens get the same answer', async () => {
    const { token } = await h.account()
    const revoked = await h.call('POST', '/v1/api-keys', { token, body: { name: 'r', scope: 'products:read' } })
    await h.call('DELETE', `/v1/api-keys/${revoked.body.id}`, { token })
    const headers: (Record<string, string> | undefined)[] = [
      undefined,
      { authorization: '' },
      { authorization: token },
      { authorization: `Basic ${btoa('user:pass')}` },
      { authorization: 'Bearer' },
      { authorization: 'Bearer kw_short' },
      { authorization: `Bearer ${token}x` },
      { authorization: `Bearer kw_${'A'.repeat(32)}` },
      { authorization: `Bearer ${revoked.body.token}` },
      { authorization: `Bearer ${ADMIN_TOKEN}` },
    ]
    const bodies = []
    for (const hdr of headers) {
      const res = await h.call('GET', '/v1/products', { headers: hdr })
      const { request_id, ...rest } = expectProblem(res, 401, 'unauthorized')
      bodies.push(rest)
    }
    for (const b of bodies) expect(b).toEqual(bodies[0])
  })

  test('authentication comes before body validation (no schema oracle)', async () => {
    expectProblem(await h.call('POST', '/v1/products', { body: { name: 5 } }), 401)
    expectProblem(await h.call('POST', '/v1/keys', { body: {} }), 401)
    expectProblem(await h.call('POST', '/admin/accounts', { body: { plan: 'nope' } }), 401)
    expectProblem(await h.call('PATCH', `/admin/accounts/${ghostId('acct')}`, { token: 'wrong-admin-token-000000', body: { plan: 'nope' } }), 401)
  })

  test('the Bearer scheme is case-insensitive; API tokens are not operator tokens', async () => {
    const { token } = await h.account()
    expect((await h.call('GET', '/v1/ping', { headers: { authorization: `bearer ${token}` } })).status).toBe(200)
    expect((await h.call('GET', '/v1/ping', { headers: { authorization: `BEARER  ${token}` } })).status).toBe(200)
    expectProblem(await h.call('GET', `/admin/accounts/${ghostId('acct')}`, { token }), 401)
  })
})

describe('403 insufficient_scope', () => {
  test('a valid key without the scope; detail names the scope needed', async () => {
    const { token } = await h.account()
    const reader = await scopedToken(h.call, token, 'products:read')
    const res = await h.call('POST', '/v1/products', { token: reader, body: { name: 'x', slug: 'x' } })
    expect(expectProblem(res, 403, 'insufficient_scope').detail).toContain('products:write')
    // scope is checked before the body: a bad body still answers 403
    expectProblem(await h.call('POST', '/v1/products', { token: reader, raw: '{}' }), 403)
  })
})

describe('404 not_found', () => {
  test('unknown routes and methods', async () => {
    const { token } = await h.account()
    expectProblem(await h.call('GET', '/v1/nothing-here', { token }), 404, 'not_found')
    expectProblem(await h.call('GET', '/nope'), 404, 'not_found')
    expectProblem(await h.call('PATCH', '/v1/products', { token }), 404, 'not_found')
  })

  test('unknown and malformed ids on every :id route', async () => {
    const { token } = await h.account()
    const bad = ['prod_00000000000000000000000000', ghostId('key'), 'nonsense', 'key_' + 'I'.repeat(26), '%00', '%E2%80%AE', 'x'.repeat(300)]
    for (const id of bad) {
      expectProblem(await h.call('GET', `/v1/products/${id}`, { token }), 404, 'not_found')
      expectProblem(await h.call('PUT', `/v1/products/${id}`, { token, body: { name: 'x' } }), 404, 'not_found')
      expectProblem(await h.call('DELETE', `/v1/products/${id}`, { token }), 404, 'not_found')
      expectProblem(await h.call('GET', `/v1/keys/${id}`, { token }), 404, 'not_found')
      expectProblem(await h.call('POST', `/v1/keys/${id}/revoke`, { token }), 404, 'not_found')
      expectProblem(await h.call('POST', `/v1/keys/${id}/extend`, { token, body: { expires_at: null } }), 404, 'not_found')
      expectProblem(await h.call('POST', `/v1/api-keys/${id}/rotate`, { token }), 404, 'not_found')
      expectProblem(await h.call('DELETE', `/v1/api-keys/${id}`, { token }), 404, 'not_found')
      expectProblem(await h.call('GET', `/admin/accounts/${id}`, { token: ADMIN_TOKEN }), 404, 'not_found')
      expectProblem(await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { name: 'x' } }), 404, 'not_found')
    }
    for (const productId of [ghostId('prod'), 'nonsense', '']) {
      expectProblem(await h.call('POST', '/v1/keys', { token, body: { product_id: productId } }), 404, 'not_found')
    }
  })
})

describe('409', () => {
  test('idempotency_key_reused: same key, different body', async () => {
    const { token } = await h.account()
    const headers = { 'idempotency-key': 'order-1' }
    expect((await h.call('POST', '/v1/products', { token, headers, body: { name: 'A', slug: 'a' } })).status).toBe(201)
    expectProblem(await h.call('POST', '/v1/products', { token, headers, body: { name: 'B', slug: 'b' } }), 409, 'idempotency_key_reused')
  })
})

describe('413 payload_too_large', () => {
  test('over 64 KiB, with and without content-length, authenticated or not', async () => {
    const { token } = await h.account()
    const big = JSON.stringify({ name: 'x', slug: 'x', description: 'd'.repeat(70 * 1024) })
    expectProblem(await h.call('POST', '/v1/products', { token, raw: big }), 413, 'payload_too_large')
    expectProblem(await h.call('POST', '/v1/products', { raw: big }), 413, 'payload_too_large')
    for (const auth of [token, null]) {
      // a stream body goes out chunked, without content-length: the limit must hold while reading
      const body = new ReadableStream({
        start(c) {
          for (let i = 0; i < 9; i++) c.enqueue(new TextEncoder().encode('x'.repeat(8 * 1024)))
          c.close()
        },
      })
      const res = await fetch(`${h.node.url}/v1/products`, { method: 'POST', body, headers: auth ? { authorization: `Bearer ${auth}` } : {} })
      const parsed = { status: res.status, headers: res.headers, body: await res.json() }
      expectProblem(parsed, 413, 'payload_too_large')
    }
    // exactly at the limit is fine (and then simply invalid)
    const atLimit = JSON.stringify({ name: 'x', slug: 'x', pad: '' })
    const padded = atLimit.replace('"pad":""', `"pad":"${'p'.repeat(64 * 1024 - atLimit.length)}"`)
    expect(Buffer.byteLength(padded)).toBe(64 * 1024)
    expect((await h.call('POST', '/v1/products', { token, raw: padded })).status).toBe(201)
    expect((await h.call('GET', '/v1/products', { token })).body.data).toHaveLength(1)
  })
})

describe('5xx', () => {
  test('an unexpected error is a logged 500 that leaks nothing', () => {
    const lines: string[] = []
    const log = createLogger('silent')
    log.error = ((obj: unknown) => void lines.push(JSON.stringify(obj))) as typeof log.error
    const err = new Error('relation "secret_table" does not exist at select * from secret_table')
    const appError = toAppError('UNKNOWN', err, log, 'req_test')
    const res = problemResponse(appError, 'req_test')
    expect(res.status).toBe(500)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    return res.json().then((body) => {
      expect(body).toEqual({
        type: 'https://keyward.dev/errors/internal_error',
        title: 'Internal error',
        status: 500,
        detail: 'Something went wrong; the request id identifies it in our logs',
        code: 'internal_error',
        request_id: 'req_test',
      })
      expect(lines.join('\n')).toContain('req_test')
    })
  })

  test('a connection error is 503 unavailable', async () => {
    const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })
    const appError = toAppError('UNKNOWN', err, createLogger('silent'), 'req_x')
    expect(statusOf(appError)).toBe(503)
    expect(appError.code).toBe('unavailable')
    expect(appError.detail).not.toContain('5432')
  })
})

// CORS on exactly the five client routes (docs/api.md, "CORS"): the preflight, and the two headers on every
// answer of those routes (errors and 401 included, with or without Origin); none anywhere else.
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, fingerprint, newKey, newProduct, useHarness } from '../support/harness'

setDefaultTimeout(60_000)
const h = useHarness() // a real socket: POST /v1/validate through the fast path

const CLIENT_ROUTES = [
  ['/v1/validate', 'POST'],
  ['/v1/deactivate', 'POST'],
  ['/v1/devices', 'POST'],
  ['/v1/offline/public-key', 'GET'],
  ['/v1/offline/keys', 'GET'],
] as const
const EXPOSED = 'keyward-signature, keyward-certificate, x-request-id, retry-after'
const ORIGIN = 'https://app.example'

let token: string
let keyValue: string
beforeAll(async () => {
  token = (await h.account()).token
  keyValue = (await newKey(h.call, token, (await newProduct(h.call, token)).id)).key_value
})

const send = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  fetch(h.node.url + path, { method, headers, body })

function corsOf(res: Response) {
  const out: Record<string, string> = {}
  res.headers.forEach((value, name) => {
    if (name.startsWith('access-control-')) out[name] = value
  })
  return out
}

describe('preflight', () => {
  for (const [path, method] of CLIENT_ROUTES) {
    test(`OPTIONS ${path} → 204 with the route's methods, before any authentication`, async () => {
      for (const variant of [path, `${path}/`]) {
        const asked: Record<string, string>[] = [
          { origin: ORIGIN, 'access-control-request-method': method, 'access-control-request-headers': 'authorization, content-type, keyward-nonce' },
          {},
        ]
        for (const headers of asked) {
          const res = await send('OPTIONS', variant, headers)
          expect([variant, res.status]).toEqual([variant, 204])
          expect(corsOf(res)).toEqual({
            'access-control-allow-origin': '*',
            'access-control-allow-methods': `${method}, OPTIONS`,
            'access-control-allow-headers': 'authorization, content-type, keyward-nonce, x-request-id',
            'access-control-max-age': '86400',
            'access-control-expose-headers': EXPOSED,
          })
          expect(await res.text()).toBe('')
        }
      }
    })
  }
})

describe('every answer of a client route', () => {
  const body = () => JSON.stringify({ key: keyValue, device_fingerprint: fingerprint() })
  const json = { 'content-type': 'application/json' }
  const auth = () => ({ ...json, authorization: `Bearer ${token}` })

  test('validate and deactivate: success, 400, 401, 413, a malformed nonce; fast path and framework door', async () => {
    for (const path of ['/v1/validate', '/v1/validate/', '/v1/deactivate']) {
      const cases: [number, Record<string, string>, string][] = [
        [200, auth(), body()],
        [400, auth(), '{}'],
        [400, auth(), 'not json'],
        [401, json, body()],
        [401, { ...json, authorization: 'Bearer kw_nope' }, body()],
        [413, auth(), JSON.stringify({ key: 'x'.repeat(70 * 1024) })],
        [400, { ...auth(), 'keyward-nonce': 'short' }, body()],
      ]
      for (const [status, headers, payload] of cases) {
        for (const origin of [{ origin: ORIGIN }, {}] as Record<string, string>[]) {
          const res = await send('POST', path, { ...headers, ...origin }, payload)
          expect([path, status, res.status]).toEqual([path, status, status])
          expect([path, status, corsOf(res)]).toEqual([
            path,
            status,
            { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED },
          ])
          await res.arrayBuffer()
        }
      }
    }
  })

  test('public key and key set: 200 and 401; devices: whatever it answers', async () => {
    for (const path of ['/v1/offline/public-key', '/v1/offline/keys']) {
      for (const [headers, status] of [[{ authorization: `Bearer ${token}` }, 200], [{}, 401]] as const) {
        const res = await send('GET', path, { ...headers, origin: ORIGIN })
        expect([path, res.status]).toEqual([path, status])
        expect(corsOf(res)).toEqual({ 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED })
      }
    }
    for (const headers of [{ authorization: `Bearer ${token}`, 'content-type': 'application/json' }, {}] as Record<string, string>[]) {
      const res = await send('POST', '/v1/devices', headers, JSON.stringify({ key: keyValue }))
      expect(corsOf(res)).toEqual({ 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED })
    }
  })

  test('a 429 exposes Retry-After to the page', async () => {
    const free = await h.account('free')
    const key = await newKey(h.call, free.token, (await newProduct(h.call, free.token)).id)
    for (let i = 0; i < 500; i++) await h.node.deps.counters.take(free.id, 500)
    const res = await send('POST', '/v1/validate', { 'content-type': 'application/json', authorization: `Bearer ${free.token}`, origin: ORIGIN }, JSON.stringify({ key: key.key_value, device_fingerprint: fingerprint() }))
    expect(res.status).toBe(429)
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
    expect(corsOf(res)).toEqual({ 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED })
  })
})

describe('no other route sends CORS headers', () => {
  test('admin and account routes, docs, health: no CORS header on any answer or preflight', async () => {
    const auth = { authorization: `Bearer ${token}`, origin: ORIGIN }
    const answers = [
      await send('GET', '/v1/products', auth),
      await send('GET', '/v1/keys', auth),
      await send('POST', '/v1/keys', { ...auth, 'content-type': 'application/json' }, '{}'),
      await send('GET', '/v1/api-keys', { origin: ORIGIN }),
      await send('GET', '/admin/accounts', { authorization: `Bearer ${ADMIN_TOKEN}`, origin: ORIGIN }),
      await send('GET', '/healthz', { origin: ORIGIN }),
      await send('GET', '/docs/json', { origin: ORIGIN }),
      await send('GET', '/v1/validatex', { origin: ORIGIN }),
      await send('GET', '/v1/offline/public-keys', auth),
      await send('GET', '/v1/signing-keys', auth),
      await send('POST', '/v1/keys/key_x/offline-licenses', auth, '{}'),
      await send('OPTIONS', '/v1/products', { origin: ORIGIN, 'access-control-request-method': 'GET' }),
      await send('OPTIONS', '/admin/accounts', { origin: ORIGIN, 'access-control-request-method': 'GET' }),
    ]
    for (const res of answers) {
      expect([res.url, corsOf(res)]).toEqual([res.url, {}])
      await res.arrayBuffer()
    }
  })
})

// The kernel's request checks are one implementation for both doors of POST /v1/validate: the
// Elysia route (app.handle, and every other route) and the fast path that Bun's router serves on a
// listening node. Each check answers alike through both.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'

let h: Harness
let token: string
let body: { key: string; device_fingerprint: string }

beforeAll(async () => {
  h = await startHarness()
  token = (await h.account()).token
  const key = await newKey(h.call, token, (await newProduct(h.call, token)).id)
  body = { key: key.key_value, device_fingerprint: 'cd'.repeat(32) }
}, 60_000)
afterAll(() => h?.close())

/** The same request through the listening node (fast path) and through the framework (app.handle). */
async function bothDoors(path: string, init: { body: string; auth?: string | null }) {
  const make = (base: string) =>
    new Request(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(init.auth === null ? {} : { authorization: `Bearer ${init.auth ?? token}` }) },
      body: init.body,
    })
  const served = await fetch(make(h.node.url))
  const handled = await h.node.app.handle(make('http://localhost'))
  return [
    { door: 'fast path', status: served.status, body: (await served.json()) as any },
    { door: 'framework', status: handled.status, body: (await handled.json()) as any },
  ]
}

describe('POST /v1/validate, both doors', () => {
  test('%00 in the query is 400 invalid_request (as on every other route), authenticated or not', async () => {
    for (const auth of [undefined, null]) {
      for (const path of ['/v1/validate?x=%00', '/v1/validate?x=a%00b&y=1']) {
        for (const answer of await bothDoors(path, { body: JSON.stringify(body), auth })) {
          expect([answer.door, answer.status, answer.body.code]).toEqual([answer.door, 400, 'invalid_request'])
          expect(answer.body.errors).toEqual([{ field: 'query', message: 'must not contain NUL characters' }])
        }
      }
    }
    expect((await h.call('GET', '/v1/products?x=%00', { token })).status).toBe(400)
    // a query without NUL changes nothing
    for (const answer of await bothDoors('/v1/validate?x=%01', { body: JSON.stringify(body) })) {
      expect([answer.door, answer.status, answer.body.valid]).toEqual([answer.door, 200, true])
    }
  })

  test('a body over 64 KiB is 413 before authentication', async () => {
    const big = JSON.stringify({ ...body, app_version: 'v'.repeat(65 * 1024) })
    for (const auth of [undefined, null, 'kw_unknown']) {
      for (const answer of await bothDoors('/v1/validate', { body: big, auth })) {
        expect([answer.door, answer.status, answer.body.code]).toEqual([answer.door, 413, 'payload_too_large'])
        expect(answer.body.detail).toBe('Request bodies are limited to 65536 bytes')
      }
    }
  })

  test('401 and 403 alike', async () => {
    const reader = (await h.call('POST', '/v1/api-keys', { token, body: { name: 'r', scope: 'keys:read' } })).body.token
    for (const [auth, status, code] of [[null, 401, 'unauthorized'], ['kw_nope', 401, 'unauthorized'], [reader, 403, 'insufficient_scope']] as const) {
      for (const answer of await bothDoors('/v1/validate', { body: JSON.stringify(body), auth })) {
        expect([answer.door, answer.status, answer.body.code]).toEqual([answer.door, status, code])
      }
    }
  })
})

describe('per-route body limit', () => {
  test('other routes keep 64 KiB; the sync route is given 256 KiB (413 past it, with or without content-length)', async () => {
    const over64 = JSON.stringify({ name: 'x', slug: 'x', description: 'd'.repeat(65 * 1024) })
    expect((await h.call('POST', '/v1/products', { token, raw: over64 })).status).toBe(413)
    const sync = (raw: string) => h.call('POST', '/v1/offline-licenses/sync', { token, raw })
    // over 64 KiB is no longer refused for its size on the sync route (these entries are then simply invalid)
    const over64Sync = JSON.stringify({ licenses: Array.from({ length: 100 }, (_, i) => `${i} ${'x'.repeat(700)}`) })
    expect(Buffer.byteLength(over64Sync)).toBeGreaterThan(64 * 1024)
    const accepted = await sync(over64Sync)
    expect(accepted.status).toBe(200)
    expect(accepted.body.results).toHaveLength(100)
    const over256 = JSON.stringify({ licenses: ['x'.repeat(256 * 1024)] })
    const refused = await sync(over256)
    expect([refused.status, refused.body.code]).toEqual([413, 'payload_too_large'])
    expect(refused.body.detail).toBe('Request bodies are limited to 262144 bytes')
    for (const path of ['/v1/offline-licenses/sync', '/v1/offline-licenses/sync/']) {
      const chunked = await fetch(`${h.node.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        body: new Blob([over256]).stream(),
      })
      expect([path, chunked.status, ((await chunked.json()) as any).code]).toEqual([path, 413, 'payload_too_large'])
    }
  })
})

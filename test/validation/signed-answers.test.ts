// Signed answers (docs/api.md, "Signed answers" and "CORS"; the format: docs/api.md, "Signed answers"): with a Keyward-Nonce,
// validate (both doors), deactivate and devices answer with Keyward-Signature over "keyward-answer/v3\n" + kid + "\n"
// + path + "\n" + nonce + "\n" + t + "\n" + the SHA-256 of the exact request body + "\n" + the exact
// response body, refusals and problems included. Verified here the way an app would: node:crypto alone,
// with the key that GET /v1/offline/public-key publishes, and the bytes the app sent.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createHash, createPublicKey, randomBytes, verify, type KeyObject } from 'node:crypto'
import { scopedToken, useHarness } from '../support/harness'
import { fingerprint, setup } from './support'
import { kidOf } from '../../src/modules/signing/keys'

setDefaultTimeout(60_000)
const h = useHarness() // a real socket: POST /v1/validate through the fast path

const nonce = () => randomBytes(24).toString('base64url') // 32 characters of [A-Za-z0-9_-]

interface Raw {
  /** The request body bytes sent. */
  sent: Uint8Array
  status: number
  headers: Headers
  bytes: Uint8Array
  json: any
}

/** One request; `door: 'framework'` hands it to the Elysia app instead of the listening node. */
async function send(
  path: string,
  opts: { token?: string; body?: unknown; raw?: string; nonce?: string | null; door?: 'socket' | 'framework'; headers?: Record<string, string> },
): Promise<Raw> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers }
  if (opts.token) headers.authorization = `Bearer ${opts.token}`
  if (opts.nonce != null) headers['keyward-nonce'] = opts.nonce
  const sent = new TextEncoder().encode(opts.raw ?? JSON.stringify(opts.body ?? {}))
  const init = { method: 'POST', headers, body: sent }
  const res = opts.door === 'framework' ? await h.node.app.handle(new Request(`http://localhost${path}`, init)) : await fetch(h.node.url + path, init)
  const bytes = new Uint8Array(await res.arrayBuffer())
  return { sent, status: res.status, headers: res.headers, bytes, json: JSON.parse(new TextDecoder().decode(bytes)) }
}

interface Signature {
  alg: string
  kid: string
  t: string
  sig: string
}

function parseSignature(header: string | null): Signature {
  expect(header).toMatch(/^alg=ed25519, kid=[0-9a-f]+, t=\d+, sig=[A-Za-z0-9+/]+=*$/)
  return Object.fromEntries(header!.split(', ').map((part) => [part.slice(0, part.indexOf('=')), part.slice(part.indexOf('=') + 1)])) as never
}

/** What an app does: rebuild the signed bytes from what it sent and received, and check them with the published key. */
function verifies(key: KeyObject, path: string, n: string, t: string, sent: Uint8Array, body: Uint8Array, sig: string): boolean {
  const kid = kidOf(key) // the signer is the root here: its kid is its public key's
  const requestSha256 = createHash('sha256').update(sent).digest('hex')
  const signed = Buffer.concat([Buffer.from(`keyward-answer/v3\n${kid}\n${path}\n${n}\n${t}\n${requestSha256}\n`, 'utf8'), body])
  return verify(null, signed, key, Buffer.from(sig, 'base64'))
}

const utf8 = (text: string) => new TextEncoder().encode(text)

const published = new Map<string, Promise<{ publicKey: KeyObject; kid: string }>>()

/** The account's published key, read with a token that may do nothing but validate (the app's own token). */
function publishedKey(token: string) {
  let key = published.get(token)
  if (!key) {
    key = (async () => {
      const appToken = await scopedToken(h.call, token, 'validate')
      const res = await h.call('GET', '/v1/offline/public-key', { token: appToken })
      expect(res.status).toBe(200)
      return { publicKey: createPublicKey(res.body.public_key_pem), kid: res.body.kid as string }
    })()
    published.set(token, key)
  }
  return key
}

/** Asserts `res` is signed for `path` and `n` with the key of `token`'s account, and that it verifies. */
async function expectSigned(res: Raw, token: string, path: string, n: string): Promise<Signature & { publicKey: KeyObject }> {
  const { publicKey, kid } = await publishedKey(token)
  const s = parseSignature(res.headers.get('keyward-signature'))
  expect(s.alg).toBe('ed25519')
  expect(s.kid).toBe(kid)
  expect(verifies(publicKey, path, n, s.t, res.sent, res.bytes, s.sig)).toBe(true)
  return { ...s, publicKey }
}

describe('signed validate, both doors', () => {
  for (const door of ['socket', 'framework'] as const) {
    test(`${door}: valid and every refusal are signed over the exact body; the signature binds body, nonce, path and time`, async () => {
      const { token, key } = await setup(h, { activation_limit: 1 })
      const holder = fingerprint()
      const cases: [string, Record<string, unknown>, unknown][] = [
        ['valid', { key: key.key_value, device_fingerprint: holder }, { valid: true }],
        ['activation_limit', { key: key.key_value, device_fingerprint: fingerprint() }, { valid: false, reason: 'activation_limit' }],
        ['not_found', { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', device_fingerprint: holder }, { valid: false, reason: 'not_found' }],
      ]
      for (const [what, body, expected] of cases) {
        const n = nonce()
        const before = Date.now()
        const res = await send('/v1/validate', { token, body, nonce: n, door })
        expect([what, res.status]).toEqual([what, 200])
        expect(res.json).toMatchObject(expected as object)
        const { publicKey, ...s } = await expectSigned(res, token, '/v1/validate', n)
        expect(Number(s.t)).toBeGreaterThanOrEqual(before)
        expect(Number(s.t)).toBeLessThanOrEqual(Date.now())
        // Anything changed fails: the body (a forged valid:true), the nonce (a replay), the path, the time.
        const forged = new TextEncoder().encode(JSON.stringify({ ...res.json, valid: true, activation_limit: 9999 }))
        expect(verifies(publicKey, '/v1/validate', n, s.t, res.sent, forged, s.sig)).toBe(false)
        expect(verifies(publicKey, '/v1/validate', nonce(), s.t, res.sent, res.bytes, s.sig)).toBe(false)
        expect(verifies(publicKey, '/v1/deactivate', n, s.t, res.sent, res.bytes, s.sig)).toBe(false)
        expect(verifies(publicKey, '/v1/validate', n, String(Number(s.t) + 1), res.sent, res.bytes, s.sig)).toBe(false)
        const oneByteMore = new Uint8Array([...res.bytes, 32])
        expect(verifies(publicKey, '/v1/validate', n, s.t, res.sent, oneByteMore, s.sig)).toBe(false)
        // Bound to the request: the answer does not verify for another key, another device, or any other body.
        for (const other of [
          { ...body, key: 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012' },
          { ...body, device_fingerprint: fingerprint() },
          { ...body, app_version: '9.9' },
        ]) {
          expect([what, verifies(publicKey, '/v1/validate', n, s.t, utf8(JSON.stringify(other)), res.bytes, s.sig)]).toEqual([what, false])
        }
      }
      // revoked
      expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
      const n = nonce()
      const revoked = await send('/v1/validate', { token, body: { key: key.key_value, device_fingerprint: holder }, nonce: n, door })
      expect(revoked.json).toEqual({ valid: false, reason: 'revoked' })
      await expectSigned(revoked, token, '/v1/validate', n)
    })

    test(`${door}: problems after authentication are signed: 400 bad body, 400 not JSON, 403`, async () => {
      const { token, key } = await setup(h, {}, 'free')
      let n = nonce()
      const bad = await send('/v1/validate', { token, body: { key: key.key_value }, nonce: n, door })
      expect([bad.status, bad.json.code]).toEqual([400, 'invalid_request'])
      expect(bad.headers.get('content-type')).toBe('application/problem+json')
      await expectSigned(bad, token, '/v1/validate', n)

      n = nonce()
      const notJson = await send('/v1/validate', { token, raw: '{"key":', nonce: n, door })
      expect(notJson.status).toBe(400)
      await expectSigned(notJson, token, '/v1/validate', n)

      n = nonce()
      const readOnly = await scopedToken(h.call, token, 'keys:read')
      const forbidden = await send('/v1/validate', { token: readOnly, body: { key: key.key_value, device_fingerprint: fingerprint() }, nonce: n, door })
      expect([forbidden.status, forbidden.json.code]).toEqual([403, 'insufficient_scope'])
      await expectSigned(forbidden, token, '/v1/validate', n)
    })
  }

  test('429 is signed, Retry-After and the signature both readable', async () => {
    const { accountId, token, key } = await setup(h, {}, 'free')
    // The day's 500 calls, taken straight from the node's counters (the HTTP path is the same engine).
    for (let i = 0; i < 500; i++) expect(await h.node.deps.counters.take(accountId, 500)).toBe(true)
    for (const door of ['socket', 'framework'] as const) {
      const n = nonce()
      const res = await send('/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fingerprint() }, nonce: n, door })
      expect([door, res.status, res.json.code]).toEqual([door, 429, 'rate_limited'])
      expect(res.headers.get('retry-after')).toBe(String(res.json.retry_after))
      await expectSigned(res, token, '/v1/validate', n)
    }
  })

  test('the digest is over the exact bytes received, on every signed route and door: same JSON spelled otherwise fails', async () => {
    const { token, key } = await setup(h)
    const device = fingerprint()
    const spaced = `{ "key" : ${JSON.stringify(key.key_value)},\n  "device_fingerprint": "${device}" }`
    for (const [path, door] of [['/v1/validate', 'socket'], ['/v1/validate', 'framework'], ['/v1/devices', 'socket'], ['/v1/deactivate', 'socket']] as const) {
      const n = nonce()
      const res = await send(path, { token, raw: path === '/v1/devices' ? `{ "key" : ${JSON.stringify(key.key_value)} }` : spaced, nonce: n, door })
      expect([path, door, res.status]).toEqual([path, door, 200])
      const { publicKey, ...s } = await expectSigned(res, token, path, n)
      const canonical = utf8(JSON.stringify(JSON.parse(new TextDecoder().decode(res.sent))))
      expect([path, door, verifies(publicKey, path, n, s.t, canonical, res.bytes, s.sig)]).toEqual([path, door, false])
    }
  })

  test('the framework door signs its canonical path whatever the variant (trailing slash, query)', async () => {
    const { token, key } = await setup(h)
    for (const path of ['/v1/validate/', '/v1/validate?from=app']) {
      const n = nonce()
      const res = await send(path, { token, body: { key: key.key_value, device_fingerprint: fingerprint() }, nonce: n })
      expect([path, res.status, res.json.valid]).toEqual([path, 200, true])
      await expectSigned(res, token, '/v1/validate', n)
    }
  })
})

describe('signed deactivate', () => {
  test('a release, a no-op and a bad body are signed for /v1/deactivate', async () => {
    const { token, key } = await setup(h)
    const device = fingerprint()
    expect((await send('/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).json.valid).toBe(true)
    for (const [expected, body] of [
      [{ deactivated: true, activations_used: 0 }, { key: key.key_value, device_fingerprint: device }],
      [{ deactivated: false }, { key: key.key_value, device_fingerprint: device }],
    ] as const) {
      const n = nonce()
      const res = await send('/v1/deactivate', { token, body, nonce: n })
      expect(res.status).toBe(200)
      expect(res.json).toMatchObject(expected)
      const { publicKey, ...s } = await expectSigned(res, token, '/v1/deactivate', n)
      expect(verifies(publicKey, '/v1/validate', n, s.t, res.sent, res.bytes, s.sig)).toBe(false)
      const otherDevice = utf8(JSON.stringify({ ...body, device_fingerprint: fingerprint() }))
      expect(verifies(publicKey, '/v1/deactivate', n, s.t, otherDevice, res.bytes, s.sig)).toBe(false)
    }
    const n = nonce()
    const bad = await send('/v1/deactivate', { token, body: { key: key.key_value }, nonce: n })
    expect(bad.status).toBe(400)
    await expectSigned(bad, token, '/v1/deactivate', n)
  })
})

describe('signed devices', () => {
  test('the device list and its 404 are signed for /v1/devices', async () => {
    const { token, key } = await setup(h)
    const device = fingerprint()
    expect((await send('/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).json.valid).toBe(true)
    const n = nonce()
    const res = await send('/v1/devices', { token, body: { key: key.key_value }, nonce: n })
    expect(res.status).toBe(200)
    expect(res.json.devices.map((d: { device_fingerprint: string }) => d.device_fingerprint)).toEqual([device])
    const { publicKey, ...s } = await expectSigned(res, token, '/v1/devices', n)
    expect(verifies(publicKey, '/v1/validate', n, s.t, res.sent, res.bytes, s.sig)).toBe(false)
    const otherKey = utf8(JSON.stringify({ key: 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012' }))
    expect(verifies(publicKey, '/v1/devices', n, s.t, otherKey, res.bytes, s.sig)).toBe(false)
    const m = nonce()
    const unknown = await send('/v1/devices', { token, body: { key: 'NOPE0-NOPE0-NOPE0-NOPE0-NOPE0' }, nonce: m })
    expect(unknown.status).toBe(404)
    await expectSigned(unknown, token, '/v1/devices', m)
  })
})

describe('what is not signed', () => {
  const malformed = ['', 'short', 'a'.repeat(15), 'a'.repeat(129), 'has space in it 0123', 'plus+slash/equals=0000', 'ümlaut-nonce-0123456']

  test('a malformed nonce (empty included) is 400 and unsigned, before anything runs, on every signed route and door', async () => {
    const { token, key } = await setup(h)
    const device = fingerprint()
    for (const bad of malformed) {
      for (const [path, door] of [['/v1/validate', 'socket'], ['/v1/validate', 'framework'], ['/v1/deactivate', 'socket']] as const) {
        let res: Raw
        try {
          res = await send(path, { token, body: { key: key.key_value, device_fingerprint: device }, nonce: bad, door })
        } catch (err) {
          // fetch itself refuses a header value it cannot send (non-Latin-1): nothing reached the node
          expect(bad).toBe('ümlaut-nonce-0123456')
          continue
        }
        expect([bad, path, door, res.status, res.json.code]).toEqual([bad, path, door, 400, 'invalid_request'])
        expect(res.json.errors[0].field).toBe('headers.keyward-nonce')
        expect(res.headers.get('keyward-signature')).toBeNull()
        expect(res.headers.get('access-control-allow-origin')).toBe('*')
      }
    }
    // Nothing ran: the device never took a slot.
    const key2 = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(key2.body.activations_used).toBe(0)
  })

  test('a 401 is not signed, even with a well-formed nonce', async () => {
    for (const [path, door] of [['/v1/validate', 'socket'], ['/v1/validate', 'framework'], ['/v1/deactivate', 'socket']] as const) {
      for (const token of [undefined, 'kw_' + 'x'.repeat(32)]) {
        const res = await send(path, { token, body: { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', device_fingerprint: fingerprint() }, nonce: nonce(), door })
        expect([path, door, res.status]).toEqual([path, door, 401])
        expect(res.headers.get('keyward-signature')).toBeNull()
      }
    }
  })

  test('without a nonce nothing is signed', async () => {
    const { token, key } = await setup(h)
    const device = fingerprint()
    for (const [path, door] of [['/v1/validate', 'socket'], ['/v1/validate', 'framework'], ['/v1/deactivate', 'socket']] as const) {
      const ok = await send(path, { token, body: { key: key.key_value, device_fingerprint: device }, door })
      expect([path, door, ok.status]).toEqual([path, door, 200])
      expect(ok.headers.get('keyward-signature')).toBeNull()
      const bad = await send(path, { token, body: {}, door })
      expect(bad.status).toBe(400)
      expect(bad.headers.get('keyward-signature')).toBeNull()
    }
  })

  test('routes that are not signed ignore the header', async () => {
    const { token } = await setup(h)
    const res = await h.call('GET', '/v1/offline/public-key', { token, headers: { 'keyward-nonce': nonce() } })
    expect(res.status).toBe(200)
    expect(res.headers.get('keyward-signature')).toBeNull()
    const products = await h.call('POST', '/v1/products', { token, body: { name: 'n', slug: `s-${Date.now()}` }, headers: { 'keyward-nonce': '' } })
    expect(products.status).toBe(201)
    expect(products.headers.get('keyward-signature')).toBeNull()
  })
})

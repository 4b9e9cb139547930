// A shipped app through a signing key rotation, against a real node (docs/api.md, "Signing keys"): an
// app built before the rotation (only the root pinned, a key set cached before) validates after a new
// signing key is activated, online, and verifies offline a license issued after it, with nothing but
// the root; once a signing key is revoked and the app's key set says so, that key's answers, its stored
// grace answer and its licenses are refused, and a sync gives the license back from the current signer.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, useHarness } from '../support/harness'
import { Keyward, memoryStorage, RevokedSignerError, UnreachableError, type FetchLike, type KeywardStorage } from '../../client/src/index.ts'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let root: { raw: string; kid: string }
beforeAll(async () => {
  const v = await vendorOn(h)
  ;({ token, validateToken, productId } = v)
  root = { raw: v.publicKey.raw, kid: v.publicKey.kid }
})

/** The app as shipped before any rotation: only the root pinned. */
const app = (storage: KeywardStorage, opts: Partial<ConstructorParameters<typeof Keyward>[0]> = {}) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, rootPublicKey: root.raw, productId, storage, retries: 0, ...opts })

/** No network at all. */
const offline: FetchLike = async () => {
  throw new TypeError('fetch failed: no network')
}

/** Records the answers' signature headers (and keeps a copy of each answer to replay). */
function recording() {
  const answers: { path: string; kid: string | null; certificate: string | null; status: number; headers: Headers; bytes: Uint8Array }[] = []
  const fetchImpl: FetchLike = async (input, init) => {
    const res = await fetch(input, init)
    const bytes = new Uint8Array(await res.arrayBuffer())
    const kid = /kid=([^,\s]+)/.exec(res.headers.get('keyward-signature') ?? '')?.[1] ?? null
    answers.push({ path: new URL(input).pathname, kid, certificate: res.headers.get('keyward-certificate'), status: res.status, headers: res.headers, bytes })
    return new Response(bytes, { status: res.status, headers: res.headers })
  }
  return { answers, fetch: fetchImpl }
}

async function createSigningKey(): Promise<{ kid: string; certificate: string; state: string }> {
  const res = await h.call('POST', '/v1/signing-keys', { token, body: {} })
  expect(res.status).toBe(201)
  return res.body
}

async function signingKeyCall(kid: string, action: 'activate' | 'revoke') {
  const res = await h.call('POST', `/v1/signing-keys/${kid}/${action}`, { token, body: {} })
  expect(res.status).toBe(200)
  return res.body
}

async function issue(keyId: string, deviceFingerprint: string) {
  const res = await h.call('POST', `/v1/keys/${keyId}/offline-licenses`, { token, body: { device_fingerprint: deviceFingerprint, ttl_seconds: 7200 } })
  expect(res.status).toBe(201)
  return res.body as { id: string; license: string; payload: Record<string, unknown> }
}

test('an app built before the rotation validates after a new signing key is activated (online) and verifies a license issued after it (offline, only the root)', async () => {
  const key = await newKey(h.call, token, productId)
  const storage = memoryStorage()
  // Before the rotation: the root signs, and the app caches the account's key set (no signing keys yet).
  const before = app(storage)
  expect((await before.validate({ key: key.key_value })).valid).toBe(true)
  const cached = await before.signingKeys()
  expect(cached?.root.kid).toBe(root.kid)
  expect(cached?.keys.some((k) => k.state === 'active')).toBe(false)

  const signing = await createSigningKey()
  expect(signing.kid).not.toBe(root.kid)
  await signingKeyCall(signing.kid, 'activate')

  // Online: the same app instance, and the app restarted on the same storage, validate; the answers are
  // the new key's, with its certificate, and the new kid made the app fetch the key set at once.
  const rec = recording()
  const restarted = app(storage, { fetch: rec.fetch })
  expect(await before.validate()).toMatchObject({ valid: true, offline: false })
  expect(await restarted.validate({ key: key.key_value })).toMatchObject({ valid: true, offline: false })
  const answer = rec.answers.find((a) => a.path === '/v1/validate')!
  expect({ kid: answer.kid, certificate: answer.certificate }).toEqual({ kid: signing.kid, certificate: signing.certificate })
  expect((await app(storage).signingKeys())?.keys.find((k) => k.kid === signing.kid)?.state).toBe('active')

  // Offline: a license issued after the rotation, signed by the new key, verifies with only the root:
  // with the cached key set, and on a device that never fetched one.
  const fingerprint = await before.fingerprint()
  const license = await issue(key.id, fingerprint)
  expect(license.payload).toMatchObject({ v: 2, kid: signing.kid })
  expect((await app(storage, { fetch: offline }).verifyLicense(license.license)).valid).toBe(true)
  expect((await app(memoryStorage(), { fetch: offline, fingerprint }).verifyLicense(license.license)).valid).toBe(true)
  // And the stored answer (signed by the new key) stands in while the node cannot be reached.
  expect(await app(storage, { fetch: offline }).validate({ key: key.key_value })).toMatchObject({ valid: true, offline: true })
})

test('a revoked signing key: its answers, its stored answer and its licenses are refused once the app\'s key set says so; sync re-signs the license', async () => {
  const key = await newKey(h.call, token, productId)
  const storage = memoryStorage()
  const signing = await createSigningKey()
  await signingKeyCall(signing.kid, 'activate')
  const rec = recording()
  const kw = app(storage, { fetch: rec.fetch })
  expect((await kw.validate({ key: key.key_value })).valid).toBe(true) // stored for grace, signed by the key
  const signed = rec.answers.find((a) => a.path === '/v1/validate' && a.kid === signing.kid)!
  expect(signed).toBeDefined()
  const license = await issue(key.id, await kw.fingerprint())
  expect(license.payload).toMatchObject({ v: 2, kid: signing.kid })

  const revoked = await signingKeyCall(signing.kid, 'revoke')
  expect(revoked).toMatchObject({ kid: signing.kid, state: 'revoked' })
  // The app learns of it with its next key set (its daily refresh, asked for here at once).
  expect((await kw.signingKeys({ refresh: true }))?.keys.find((k) => k.kid === signing.kid)?.state).toBe('revoked')

  // An answer the revoked key signed (replayed by whoever holds it) is refused, certificate or not.
  const replay: FetchLike = async () => new Response(signed.bytes as Uint8Array<ArrayBuffer>, { status: signed.status, headers: signed.headers })
  const err = await app(storage, { fetch: replay }).validate({ key: key.key_value }).then(() => null, (e) => e)
  expect(err).toBeInstanceOf(RevokedSignerError)
  expect(err).toMatchObject({ code: 'signing_key_revoked', kid: signing.kid })
  // Its stored answer no longer stands in, and its license is refused offline.
  expect(await app(storage, { fetch: offline }).validate({ key: key.key_value }).then(() => null, (e) => e)).toBeInstanceOf(UnreachableError)
  expect(await app(storage, { fetch: offline }).verifyLicense(license.license)).toMatchObject({ valid: false, reason: 'signing_key_revoked' })

  // The node signs with the root again: online the app is valid at once; a sync gives a license by the current signer.
  expect(await kw.validate()).toMatchObject({ valid: true, offline: false })
  expect(rec.answers.at(-1)?.kid).toBe(root.kid)
  const sync = await h.call('POST', '/v1/offline-licenses/sync', { token, body: { licenses: [license.license] } })
  expect(sync.status).toBe(200)
  expect(sync.body.results[0]).toMatchObject({ id: license.id, status: 'valid' })
  expect((await app(storage, { fetch: offline }).verifyLicense(sync.body.results[0].license)).valid).toBe(true)
})

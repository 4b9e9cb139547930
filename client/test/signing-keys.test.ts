// The chain of trust (docs/api.md, "Signing keys") against the fake signing server: the app pins only
// the root; answers signed by the root or by a signing key the root certified (Keyward-Certificate)
// verify; a forged certificate, another account's, a relabelled kid and a kid the key set marks
// revoked are refused; the key set is fetched, checked against the root, cached, refreshed at most
// once a day and at once on an unknown kid; offline licenses v1 and v2 verify with only the root.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { generateKeyPairSync } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileStorage, Keyward, memoryStorage, RevokedSignerError, SignatureError, UnreachableError, type FetchLike, type KeywardOptions } from '../src/index.ts'
import { canonicalJson } from '../src/canonical.ts'
import { canonical } from './support/canonical'
import { ACCOUNT, certify, makeSigningKey, startFakeServer, type FakeServer } from './support/fake-server'
import { rejection } from './support/rejection'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const OTHER_KEY = 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012' // a key with no stored answer: a refused answer is an error, not grace
const FP = 'a'.repeat(64)
const DAY = 86_400_000
let fake: FakeServer
let dir: string
beforeAll(() => {
  fake = startFakeServer()
  dir = mkdtempSync(join(tmpdir(), 'keyward-keys-'))
})
afterAll(async () => {
  await fake.stop()
  rmSync(dir, { recursive: true, force: true })
})
beforeEach(() => {
  fake.mode = 'ok'
  fake.script = []
  fake.requests = []
  fake.errorAnswer = null
  fake.signer = null
  fake.keys = []
  fake.relabelAs = null
  fake.certificateOverride = undefined
  fake.keySetCalls = 0
  fake.keySetMode = 'ok'
  fake.clockOffset = 0
  fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
})

const client = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: fake.url, token: 'kw_test', rootPublicKey: fake.publicKeyRaw, fingerprint: FP, backoffMs: 1, retries: 0, storage: memoryStorage(), ...opts })

/** Where an outcome is an error: its class and code; else whether it was valid. */
const outcome = (p: Promise<{ valid: boolean; offline?: boolean }>) =>
  p.then(
    (r) => `valid=${r.valid}${r.offline ? ' (offline)' : ''}`,
    (e) => `${e instanceof RevokedSignerError ? 'revoked' : e instanceof SignatureError ? 'forged' : e?.constructor?.name}:${e.code}`,
  )

/** A fetch with no network at all (an air-gapped machine). */
const offline: FetchLike = async () => {
  throw new TypeError('fetch failed: no network')
}

test('the root signs: answers verify with rootPublicKey alone; publicKey is the same option under its earlier name', async () => {
  expect(await outcome(client().validate({ key: KEY }))).toBe('valid=true')
  expect(await outcome(new Keyward({ baseUrl: fake.url, token: 'kw_test', publicKey: fake.publicKeyRaw, fingerprint: FP, storage: memoryStorage() }).validate({ key: KEY }))).toBe('valid=true')
  expect(await outcome(client({ rootPublicKey: fake.publicKeyPem }).validate({ key: KEY }))).toBe('valid=true')
  expect(() => client({ publicKey: fake.publicKeyPem })).toThrow(TypeError) // two different keys: which one is pinned?
  expect(() => new Keyward({ baseUrl: fake.url, token: 'kw_test' })).toThrow('rootPublicKey')
  // Another root pinned: the genuine answer is not this app's account's.
  const otherRoot = generateKeyPairSync('ed25519').publicKey.export({ format: 'pem', type: 'spki' }).toString()
  expect(await outcome(client({ rootPublicKey: otherRoot }).validate({ key: KEY }))).toBe('forged:bad_signature')
})

test('a signing key the root certified signs: the answer carries its certificate and verifies with only the root', async () => {
  const key = fake.createKey()
  fake.activate(key)
  const storage = memoryStorage()
  // Offline key set (the GET fails): the certificate chain alone vouches for the signer.
  fake.keySetMode = 'down'
  expect(await outcome(client({ storage }).validate({ key: KEY }))).toBe('valid=true')
  fake.keySetMode = 'ok'
  const kw = client({ storage })
  expect(await outcome(kw.validate({ key: KEY }))).toBe('valid=true')
  // The stored answer keeps its certificate: it stands in while the service is away.
  fake.mode = 'down'
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
  // Without the certificate, the key set (cached, root-signed) still places the kid.
  fake.mode = 'ok'
  fake.certificateOverride = null
  expect(await outcome(kw.validate())).toBe('valid=true')
  // With no key set and no certificate, nothing vouches for it.
  expect(await outcome(client({ fetch: (input, init) => (String(input).endsWith('/v1/offline/keys') ? offline(input, init) : fetch(input, init)) }).validate({ key: KEY }))).toBe('forged:bad_signature')
})

test('a forged certificate is refused: another root\'s, an altered one, a malformed one', async () => {
  const otherRoot = generateKeyPairSync('ed25519').privateKey
  const impostor = makeSigningKey(otherRoot) // a genuine key of another root (another account)
  fake.signer = impostor
  expect(await outcome(client().validate({ key: KEY }))).toBe('forged:bad_signature')
  // The fake account's root never certified it: its kid is not in the key set, which was asked once.
  expect(fake.keySetCalls).toBe(1)
  const genuine = fake.createKey()
  fake.activate(genuine)
  const [head, payload, sig] = genuine.certificate.split('.')
  const altered = JSON.parse(Buffer.from(payload!, 'base64url').toString())
  altered.created_at = '2020-01-01T00:00:00.000Z'
  for (const certificate of [`${head}.${Buffer.from(JSON.stringify(altered)).toString('base64url')}.${sig}`, `KWCERT2.${payload}.${sig}`, `${head}.${payload}`, 'garbage']) {
    fake.certificateOverride = certificate
    expect({ certificate, result: await outcome(client({ fetch: keySetOffline }).validate({ key: KEY })) }).toEqual({ certificate, result: 'forged:bad_signature' })
  }
})

/** The service answers, but the key set cannot be fetched (so only the certificate can vouch). */
const keySetOffline: FetchLike = (input, init) => (String(input).endsWith('/v1/offline/keys') ? offline(input, init) : fetch(input, init))

test('a certificate the root signed for another account is refused once the app knows its account', async () => {
  fake.activate(fake.createKey()) // the key set now names the account (acct_fake) in its certificates
  const storage = memoryStorage()
  expect(await outcome(client({ storage }).validate({ key: KEY }))).toBe('valid=true')
  const stray = makeSigningKey(fake.rootPrivateKey, 'acct_other')
  fake.signer = stray
  expect(await outcome(client({ storage }).validate({ key: KEY }))).toBe('valid=true (offline)') // refused: the stored answer stands in
  expect(await outcome(client({ storage }).validate({ key: OTHER_KEY }))).toBe('forged:bad_signature')
  // A certificate whose kid is not its key's.
  const mislabelled = { ...stray, certificate: certify(fake.rootPrivateKey, { kid: 'f'.repeat(32), public_key: stray.publicKeyRaw, account_id: ACCOUNT, created_at: stray.created_at }) }
  fake.signer = mislabelled
  fake.certificateOverride = mislabelled.certificate
  expect(await outcome(client({ fetch: keySetOffline }).validate({ key: KEY }))).toBe('forged:bad_signature')
})

test('a relabelled kid is refused: another key\'s kid and certificate on a signature, or a certificate for another kid', async () => {
  const a = fake.createKey()
  const b = fake.createKey()
  fake.activate(a)
  const storage = memoryStorage()
  expect(await outcome(client({ storage }).validate({ key: KEY }))).toBe('valid=true')
  fake.mode = 'relabelled' // signed by A over B's kid, sent as B's with B's certificate
  fake.relabelAs = b
  expect(await outcome(client({ storage }).validate({ key: OTHER_KEY }))).toBe('forged:bad_signature')
  fake.mode = 'ok'
  fake.certificateOverride = b.certificate // A's kid, B's certificate
  expect(await outcome(client({ storage }).validate({ key: OTHER_KEY }))).toBe('forged:bad_signature')
  expect(await outcome(client({ fetch: keySetOffline }).validate({ key: KEY }))).toBe('forged:bad_signature')
})

test('a kid the key set marks revoked is refused, even with a valid certificate; its stored answer stands in for nothing', async () => {
  const leaked = fake.createKey()
  fake.activate(leaked)
  const storage = memoryStorage()
  const kw = client({ storage })
  expect(await outcome(kw.validate({ key: KEY }))).toBe('valid=true')
  fake.revoke(leaked)
  fake.signer = leaked // whoever holds the leaked private half keeps signing with it
  // The app learns of the revocation with its next key set (here asked for at once).
  expect((await kw.signingKeys({ refresh: true }))?.keys.find((k) => k.kid === leaked.kid)?.state).toBe('revoked')
  const err = await rejection(kw.validate())
  expect(err).toBeInstanceOf(RevokedSignerError)
  expect(err).toBeInstanceOf(SignatureError)
  expect(err).toMatchObject({ code: 'signing_key_revoked', kid: leaked.kid, status: 200 })
  // The answer stored while the key was trusted no longer stands in (here behind a genuine 503).
  fake.signer = null
  fake.mode = 'down'
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
  fake.signer = leaked
  // A new app sharing the storage (the cached set) refuses it too, without asking again.
  fake.mode = 'ok'
  const calls = fake.keySetCalls
  expect(await outcome(client({ storage }).validate({ key: KEY }))).toBe('revoked:signing_key_revoked')
  expect(fake.keySetCalls).toBe(calls)
  // The service signs with the root again: valid.
  fake.signer = null
  expect(await outcome(client({ storage }).validate({ key: KEY }))).toBe('valid=true')
})

test('an unknown kid refreshes the key set at once, once', async () => {
  const storage = memoryStorage()
  const kw = client({ storage })
  await kw.validate({ key: KEY })
  expect(fake.keySetCalls).toBe(1) // the first call fetched the set
  const next = fake.createKey()
  fake.activate(next)
  await kw.validate()
  expect(fake.keySetCalls).toBe(2) // a kid the cached set did not know
  expect((await kw.signingKeys())?.keys.map((k) => [k.kid, k.state])).toEqual([[next.kid, 'active']])
  await kw.validate()
  await client({ storage }).validate({ key: KEY })
  expect(fake.keySetCalls).toBe(2) // known now: no more requests
  // A certified kid the fresh set still does not list: one refresh, then the certificate alone.
  fake.signer = makeSigningKey(fake.rootPrivateKey)
  expect(await outcome(kw.validate())).toBe('valid=true')
  expect(await outcome(kw.validate())).toBe('valid=true')
  expect(fake.keySetCalls).toBe(3)
})

test('the key set is refreshed at most once a day while online; a failed fetch is not repeated on every call', async () => {
  let now = Date.now()
  const kw = client({ now: () => now, storage: memoryStorage() })
  for (let i = 0; i < 5; i++) await kw.validate({ key: KEY })
  expect(fake.keySetCalls).toBe(1)
  now += DAY - 60_000
  fake.clockOffset = now - Date.now()
  await kw.validate()
  expect(fake.keySetCalls).toBe(1)
  now += 120_000
  fake.clockOffset = now - Date.now()
  await kw.validate()
  await kw.validate()
  expect(fake.keySetCalls).toBe(2)
  // A day later the set cannot be fetched: the answers still verify, and the next try waits.
  now += DAY
  fake.clockOffset = now - Date.now()
  fake.keySetMode = 'down'
  expect(await outcome(kw.validate())).toBe('valid=true')
  expect(await outcome(kw.validate())).toBe('valid=true')
  expect(fake.keySetCalls).toBe(3)
  fake.keySetMode = 'ok'
  now += 2 * 3_600_000
  fake.clockOffset = now - Date.now()
  await kw.validate()
  expect(fake.keySetCalls).toBe(4)
})

test('a key set not signed by the root is not cached; an older one never replaces a newer one', async () => {
  fake.keySetMode = 'forged'
  const kw = client()
  expect(await outcome(kw.validate({ key: KEY }))).toBe('valid=true')
  expect(await kw.signingKeys()).toBeNull()
  fake.keySetMode = 'ok'
  const key = fake.createKey()
  const old = fake.keySet() // lists the key as pending
  fake.revoke(key)
  fake.clockOffset = 1000 // the newer set is issued later
  const storage = memoryStorage()
  expect((await client({ storage }).signingKeys({ refresh: true }))?.keys[0]?.state).toBe('revoked')
  // A proxy answers the older set (genuine, but it would hide the revocation): the newer one stays.
  const replaying: FetchLike = (input, init) => (String(input).endsWith('/v1/offline/keys') ? Promise.resolve(Response.json(old)) : fetch(input, init))
  expect((await client({ storage, fetch: replaying }).signingKeys({ refresh: true }))?.keys[0]?.state).toBe('revoked')
})

test('the key set is cached in the storage: a file of mode 0600, read back by the next start without a request', async () => {
  fake.activate(fake.createKey())
  const path = join(dir, 'state.json')
  await client({ storage: fileStorage(path) }).validate({ key: KEY })
  expect(fake.keySetCalls).toBe(1)
  expect(statSync(path).mode & 0o777).toBe(0o600)
  const restarted = client({ storage: fileStorage(path) })
  expect(await outcome(restarted.validate({ key: KEY }))).toBe('valid=true')
  expect(fake.keySetCalls).toBe(1)
  expect((await restarted.signingKeys())?.root.kid).toBe(fake.kid)
})

test('offline licenses: v1 and v2, by the root or a certified signing key, verify offline with only the root', async () => {
  const now = Date.now()
  const base = { id: 'lic_1', account_id: ACCOUNT, key_id: 'key_1', product_id: 'prod_L', plan: 'pro', device_fingerprint: FP, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3_600_000).toISOString() }
  const kw = client({ productId: 'prod_L', fetch: offline })
  const signer = fake.createKey()
  const cases: [string, string, string][] = [
    ['v1 by the root', fake.license({ v: 1, ...base }), 'valid'],
    ['v2 by the root', fake.license({ v: 2, ...base, kid: fake.kid }), 'valid'],
    ['v2 by a signing key', fake.license({ v: 2, ...base, kid: signer.kid }, signer), 'valid'],
    ['v1 by a signing key', fake.license({ v: 1, ...base }, signer), 'bad_signature'],
    ['v2 naming another kid', fake.license({ v: 2, ...base, kid: fake.kid }, signer), 'bad_signature'],
    ['v2 by another root\'s key', (() => { const k = makeSigningKey(generateKeyPairSync('ed25519').privateKey); return fake.license({ v: 2, ...base, kid: k.kid }, k) })(), 'bad_signature'],
    ['v2 certified for another account', (() => { const k = makeSigningKey(fake.rootPrivateKey, 'acct_other'); return fake.license({ v: 2, ...base, kid: k.kid }, k) })(), 'bad_signature'],
    ['v2 without its certificate', fake.license({ v: 2, ...base, kid: signer.kid }, { ...signer, certificate: undefined as never }), 'bad_signature'],
  ]
  for (const [name, text, expected] of cases) {
    const r = await kw.verifyLicense(text)
    expect({ name, result: r.valid ? 'valid' : r.reason }).toEqual({ name, result: expected })
  }
  // The payload's kid is the signer's: a relabelled envelope kid is refused.
  const envelope = (text: string) => JSON.parse(Buffer.from(text.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64').toString())
  const wrap = (env: unknown) => `-----BEGIN KEYWARD LICENSE-----\n${Buffer.from(JSON.stringify(env)).toString('base64')}\n-----END KEYWARD LICENSE-----\n`
  const v2 = envelope(fake.license({ v: 2, ...base, kid: signer.kid }, signer))
  expect((await kw.verifyLicense(wrap({ ...v2, kid: fake.kid }))).valid).toBe(false)
  expect((await kw.verifyLicense(wrap(v2))).valid).toBe(true)
})

test('a license signed by a key the cached set marks revoked is refused as signing_key_revoked (sync it for a new one)', async () => {
  const now = Date.now()
  const signer = fake.createKey()
  const text = fake.license({ v: 2, id: 'lic_2', account_id: ACCOUNT, key_id: 'key_1', product_id: 'prod_L', plan: null, device_fingerprint: FP, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3_600_000).toISOString(), kid: signer.kid }, signer)
  const storage = memoryStorage()
  const kw = client({ storage, productId: 'prod_L' })
  expect((await kw.verifyLicense(text)).valid).toBe(true)
  fake.revoke(signer)
  await kw.signingKeys({ refresh: true })
  expect(await kw.verifyLicense(text)).toMatchObject({ valid: false, reason: 'signing_key_revoked' })
  // Offline, from the cached set alone.
  expect(await client({ storage, productId: 'prod_L', fetch: offline }).verifyLicense(text)).toMatchObject({ valid: false, reason: 'signing_key_revoked' })
})

test('canonical JSON (RFC 8785) for the key set\'s shapes', () => {
  // RFC 8785 §3.2.3: members sorted by UTF-16 code units.
  const sorting = { '\u20ac': 'Euro Sign', '\r': 'Carriage Return', '\ufb33': 'Hebrew Letter Dalet With Dagesh', '1': 'One', '\ud83d\ude00': 'Emoji: Grinning Face', '\u0080': 'Control', '\u00f6': 'Latin Small Letter O With Diaeresis' }
  expect(canonicalJson(sorting)).toBe('{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}')
  const shapes = { z: null, a: [true, false, 0, -7, 1e21, 'x\u2028"\\\n\u0001'], m: { b: {}, a: [] }, skipped: undefined }
  expect(canonicalJson(shapes)).toBe('{"a":[true,false,0,-7,1e+21,"x\u2028\\"\\\\\\n\\u0001"],"m":{"a":[],"b":{}},"z":null}')
  expect(canonicalJson(shapes)).toBe(canonical(shapes))
  expect(canonicalJson(fake.keySet())).toBe(canonical(fake.keySet()))
})

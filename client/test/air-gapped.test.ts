// Air-gapped activation on the device (docs/integrating.md, "Customers without a network"), with no
// network at all: the request code's format and limits, the device key pair kept in the storage (file
// mode 0600), a response accepted only when it is the account's (root or certified signing key), for
// the pending request's nonce, this fingerprint and this device key; the deactivation code signed by
// the device key (verified here with the public key the request carried); receipts; QR output.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { generateKeyPairSync, sign, verify, createPublicKey } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileStorage, Keyward, KeywardError, memoryStorage, OfflineResponseError, type FetchLike, type KeywardOptions, type KeywardStorage } from '../src/index.ts'
import { qrSize, qrSvg, qrText } from '../src/qr.ts'
import { ACCOUNT, makeSigningKey, startFakeServer, type FakeServer } from './support/fake-server'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const FP = 'a'.repeat(64)
const PRODUCT = 'prod_air'
const HOUR = 3_600_000
let fake: FakeServer
let dir: string
beforeAll(() => {
  fake = startFakeServer()
  dir = mkdtempSync(join(tmpdir(), 'keyward-airgap-'))
})
afterAll(async () => {
  await fake.stop()
  rmSync(dir, { recursive: true, force: true })
})

/** An air-gapped device: every request fails (and is counted, so a test can say none was made). */
let fetches = 0
const noNetwork: FetchLike = async () => {
  fetches++
  throw new TypeError('fetch failed: no network')
}

const device = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: 'http://127.0.0.1:9', token: 'kw_test', rootPublicKey: fake.publicKeyRaw, fingerprint: FP, productId: PRODUCT, retries: 0, fetch: noNetwork, storage: memoryStorage(), ...opts })

const b64urlJson = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))

function decodeRequest(code: string) {
  expect(code.startsWith('KWREQ1.')).toBe(true)
  const body = code.slice('KWREQ1.'.length)
  expect(body).toMatch(/^[A-Za-z0-9_-]+$/) // base64url, no padding
  return b64urlJson(body)
}

/** What the service would answer (docs/api.md, offline licenses v2 plus the air-gapped fields), signed by the root or a signing key. */
function respond(request: ReturnType<typeof decodeRequest>, over: Record<string, unknown> = {}, signer: Parameters<FakeServer['license']>[1] = null) {
  const now = Date.now()
  const payload = {
    v: 2,
    kid: signer?.kid ?? fake.kid,
    id: 'olic_1',
    account_id: ACCOUNT,
    key_id: 'key_1',
    product_id: PRODUCT,
    plan: 'pro',
    device_fingerprint: request.device_fingerprint,
    issued_at: new Date(now).toISOString(),
    expires_at: new Date(now + 24 * HOUR).toISOString(),
    entitlements: { export: true },
    activation_id: 'act_1',
    device_public_key: request.device_public_key,
    request_nonce: request.nonce,
    components: request.components ?? null,
    component_match: 'off',
    ...over,
  }
  return `KWRES1.${Buffer.from(fake.license(payload, signer)).toString('base64url')}`
}

/** The reason an activateOffline call was refused with, or 'accepted'. */
const outcome = (p: Promise<unknown>) => p.then(() => 'accepted', (e) => (e instanceof OfflineResponseError ? e.reason : `${e?.constructor?.name}:${e?.code}`))

test('the request code: KWREQ1 + base64url JSON with the device key, a fresh url-safe nonce and the time; at most 2,048 characters', async () => {
  const app = device({ now: () => 1_700_000_000_000 })
  const code = await app.offlineActivationRequest({ key: ` ${KEY} `, deviceName: 'Lab PC 4', components: { machine_id: 'AB'.repeat(32), disk: 'cd'.repeat(32) } })
  expect(code.length).toBeLessThanOrEqual(2048)
  const request = decodeRequest(code)
  expect(Object.keys(request)).toEqual(['v', 'key', 'device_fingerprint', 'components', 'device_name', 'device_public_key', 'nonce', 't'])
  expect(request).toMatchObject({ v: 1, key: KEY, device_fingerprint: FP, components: { machine_id: 'ab'.repeat(32), disk: 'cd'.repeat(32) }, device_name: 'Lab PC 4', t: 1_700_000_000_000 })
  expect(request.nonce).toMatch(/^[A-Za-z0-9_-]{16,64}$/)
  expect(request.device_public_key).toMatch(/^[A-Za-z0-9_-]+$/)
  expect(Buffer.from(request.device_public_key, 'base64url').length).toBe(32)
  expect(await app.pendingOfflineRequest()).toBe(code)

  // Optional fields are left out; each request has its own nonce; the device keeps one key pair while a request is pending.
  const again = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  expect('components' in again || 'device_name' in again).toBe(false)
  expect(again.nonce).not.toBe(request.nonce)
  expect(again.device_public_key).toBe(request.device_public_key)
  // A fresh device makes a fresh key pair.
  expect(decodeRequest(await device().offlineActivationRequest({ key: KEY })).device_public_key).not.toBe(request.device_public_key)

  // Longer than one QR code holds: refused, nothing pending changes.
  const long = await app.offlineActivationRequest({ key: KEY, deviceName: 'x'.repeat(100), components: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`component_${i}_${'n'.repeat(18)}`, 'ab'.repeat(32)])) }).catch((e) => e)
  expect(long).toBeInstanceOf(KeywardError)
  expect(long.code).toBe('request_too_long')
  expect(decodeRequest((await app.pendingOfflineRequest())!).nonce).toBe(again.nonce)
  // Components in a form the service refuses are refused here first.
  await expect(app.offlineActivationRequest({ key: KEY, components: { Disk: 'ab'.repeat(32) } })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: KEY, components: { disk: 'xyz' } })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: KEY, components: {} })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: '' })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: 'k'.repeat(257) })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: KEY, deviceName: 'x'.repeat(101) })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: KEY, deviceName: 'tab\there' })).rejects.toThrow(TypeError)
  await expect(app.offlineActivationRequest({ key: KEY, deviceName: '' })).rejects.toThrow(TypeError)
  expect(fetches).toBe(0)
})

test('a genuine response for the pending request is stored: verifyLicense() checks it offline; the pending request goes, the device key stays', async () => {
  const storage = memoryStorage()
  const app = device({ storage })
  const request = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  expect(await app.verifyLicense()).toMatchObject({ valid: false, reason: 'malformed' }) // nothing stored yet
  const response = respond(request)
  const result = await app.activateOffline(response)
  expect(result.valid).toBe(true)
  expect(result.license).toMatchObject({ id: 'olic_1', activation_id: 'act_1', request_nonce: request.nonce })
  expect(result.has('export')).toBe(true)
  expect(await app.pendingOfflineRequest()).toBeNull()
  const checked = await app.verifyLicense()
  expect(checked.valid).toBe(true)
  // The same response pasted twice: accepted again, nothing changes.
  expect(await outcome(app.activateOffline(response))).toBe('accepted')
  // Another Keyward on the same storage (the app restarted) sees the license.
  expect((await device({ storage }).verifyLicense()).valid).toBe(true)
  // A renewal: a new request keeps the device key and the license until its response comes.
  const renewal = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  expect(renewal.device_public_key).toBe(request.device_public_key)
  expect((await app.verifyLicense()).valid).toBe(true)
  expect(await outcome(app.activateOffline(respond(renewal, { id: 'olic_2' })))).toBe('accepted')
  const renewed = await app.verifyLicense()
  expect(renewed.valid ? renewed.license.id : renewed.reason).toBe('olic_2')
  expect(fetches).toBe(0)
})

test('a response signed by a signing key the root certified verifies with only the root, offline', async () => {
  const app = device()
  const request = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  const signer = makeSigningKey(fake.rootPrivateKey)
  expect(await outcome(app.activateOffline(respond(request, {}, signer)))).toBe('accepted')
  // A signing key of another account's root: not this account's.
  const app2 = device()
  const request2 = decodeRequest(await app2.offlineActivationRequest({ key: KEY }))
  const stranger = makeSigningKey(generateKeyPairSync('ed25519').privateKey)
  expect(await outcome(app2.activateOffline(respond(request2, {}, stranger)))).toBe('bad_signature')
})

test('refused, storing nothing: another request\'s nonce, another device or device key, an altered or forged response, garbage, no pending request', async () => {
  const app = device()
  expect(await outcome(app.activateOffline(respond({ device_fingerprint: FP, device_public_key: 'A'.repeat(43), nonce: 'n'.repeat(32) })))).toBe('no_pending_request')
  const request = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  const other = decodeRequest(await device().offlineActivationRequest({ key: KEY }))

  expect(await outcome(app.activateOffline(respond(request, { request_nonce: other.nonce })))).toBe('wrong_request')
  expect(await outcome(app.activateOffline(respond(request, { request_nonce: undefined })))).toBe('wrong_request')
  expect(await outcome(app.activateOffline(respond(request, { device_public_key: other.device_public_key })))).toBe('wrong_device')
  expect(await outcome(app.activateOffline(respond(request, { device_fingerprint: 'b'.repeat(64) })))).toBe('wrong_device')
  expect(await outcome(app.activateOffline(respond(request, { product_id: 'prod_other' })))).toBe('wrong_product')
  expect(await outcome(app.activateOffline(respond(request, { expires_at: new Date(Date.now() - HOUR).toISOString() })))).toBe('expired')

  // Altered: the license payload edited (a later expiry) keeping the signature.
  const genuine = respond(request)
  const text = Buffer.from(genuine.slice(7), 'base64url').toString('utf8')
  const envelope = JSON.parse(Buffer.from(text.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64').toString('utf8'))
  const payload = JSON.parse(Buffer.from(envelope.enc, 'base64').toString('utf8'))
  payload.expires_at = new Date(Date.now() + 3650 * 24 * HOUR).toISOString()
  const altered = { ...envelope, enc: Buffer.from(JSON.stringify(payload)).toString('base64') }
  const alteredText = `-----BEGIN KEYWARD LICENSE-----\n${Buffer.from(JSON.stringify(altered)).toString('base64')}\n-----END KEYWARD LICENSE-----\n`
  expect(await outcome(app.activateOffline(`KWRES1.${Buffer.from(alteredText).toString('base64url')}`))).toBe('bad_signature')
  // Forged: signed by a key of its own, root-shaped.
  const forger = generateKeyPairSync('ed25519').privateKey
  const forgedEnvelope = { ...envelope, sig: sign(null, Buffer.from(`license/${envelope.enc}`), forger).toString('base64') }
  const forgedText = `-----BEGIN KEYWARD LICENSE-----\n${Buffer.from(JSON.stringify(forgedEnvelope)).toString('base64')}\n-----END KEYWARD LICENSE-----\n`
  expect(await outcome(app.activateOffline(`KWRES1.${Buffer.from(forgedText).toString('base64url')}`))).toBe('bad_signature')
  // A character of the code flipped in transit.
  const flipped = genuine.slice(0, 60) + (genuine[60] === 'A' ? 'B' : 'A') + genuine.slice(61)
  expect(['bad_signature', 'malformed']).toContain(await outcome(app.activateOffline(flipped)))
  for (const garbage of ['', 'KWRES1.', 'KWRES1.!!!', 'KWREQ1.abc', genuine.slice(7), `KWRES1.${'A'.repeat(40_000)}`]) {
    expect(await outcome(app.activateOffline(garbage))).toBe('malformed')
  }
  // Nothing was stored: no license, and the request still waits; then the genuine answer works,
  // pasted with the line breaks a terminal or e-mail adds.
  expect((await app.verifyLicense()).valid).toBe(false)
  expect(await app.pendingOfflineRequest()).not.toBeNull()
  expect(await outcome(app.activateOffline(genuine.replace(/(.{76})/g, '$1\n')))).toBe('accepted')
  expect(fetches).toBe(0)
})

test('file storage: the device key and the pending request are written with mode 0600', async () => {
  const path = join(dir, 'nested', 'state.json')
  const app = device({ storage: fileStorage(path) })
  const request = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  expect(statSync(path).mode & 0o777).toBe(0o600)
  const stored = JSON.parse(readFileSync(path, 'utf8'))
  const state = JSON.parse(stored[`air-gapped:${PRODUCT}`])
  expect(state.public_key).toBe(request.device_public_key)
  expect(state.private_key.length).toBeGreaterThan(40)
  await app.activateOffline(respond(request))
  expect(statSync(path).mode & 0o777).toBe(0o600)
  // A restarted app on the same file: the license is there, checked offline.
  expect((await device({ storage: fileStorage(path) }).verifyLicense()).valid).toBe(true)
})

test('deactivation: KWDEA1 signed by the device key (verified with the public key the request carried); the license and pending state are gone', async () => {
  const storage: KeywardStorage = memoryStorage()
  const T = Date.now()
  const app = device({ storage, now: () => T })
  expect(await app.offlineDeactivationRequest().catch((e) => e.code)).toBe('not_activated_offline')
  const request = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  await app.activateOffline(respond(request))
  const code = await app.offlineDeactivationRequest()
  const parts = code.split('.')
  expect(parts.length).toBe(3)
  expect(parts[0]).toBe('KWDEA1')
  expect(parts[1]).toMatch(/^[A-Za-z0-9_-]+$/)
  expect(parts[2]).toMatch(/^[A-Za-z0-9_-]+$/)
  expect(b64urlJson(parts[1]!)).toEqual({ v: 1, license_id: 'olic_1', activation_id: 'act_1', device_fingerprint: FP, t: T })
  // What the service does with the activation's stored device_public_key.
  const devicePublic = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: request.device_public_key }, format: 'jwk' })
  expect(verify(null, Buffer.from(`KWDEA1.${parts[1]}`, 'ascii'), devicePublic, Buffer.from(parts[2]!, 'base64url'))).toBe(true)
  // Altered (another activation id), it no longer verifies.
  const forgedPayload = Buffer.from(JSON.stringify({ ...b64urlJson(parts[1]!), activation_id: 'act_2' })).toString('base64url')
  expect(verify(null, Buffer.from(`KWDEA1.${forgedPayload}`, 'ascii'), devicePublic, Buffer.from(parts[2]!, 'base64url'))).toBe(false)

  // The license and the private key are gone; the same code can be shown again until a new request.
  expect(await app.verifyLicense()).toMatchObject({ valid: false, reason: 'malformed' })
  expect(await app.pendingOfflineRequest()).toBeNull()
  const state = JSON.parse((await storage.get(`air-gapped:${PRODUCT}`))!)
  expect(state.license).toBeUndefined()
  expect(state.private_key).toBe('')
  expect(await app.offlineDeactivationRequest()).toBe(code)
  const fresh = decodeRequest(await app.offlineActivationRequest({ key: KEY }))
  expect(fresh.device_public_key).not.toBe(request.device_public_key) // a new seat, a new device key
  expect(await app.offlineDeactivationRequest().catch((e) => e.code)).toBe('not_activated_offline')
})

test('receipts: KWRCP1 signed by the root or a certified signing key verify; altered, forged or another account\'s do not', async () => {
  const app = device()
  const receipt = (signer: { kid: string; privateKey: Parameters<typeof sign>[2]; certificate?: string }, over: Record<string, unknown> = {}) => {
    const body = `KWRCP1.${Buffer.from(JSON.stringify({ activation_id: 'act_1', license_id: 'olic_1', released_at: '2026-11-28T06:00:00.000Z', kid: signer.kid, ...over })).toString('base64url')}`
    const sig = sign(null, Buffer.from(body, 'ascii'), signer.privateKey).toString('base64url')
    return signer.certificate ? `${body}.${sig}.${signer.certificate}` : `${body}.${sig}`
  }
  const root = { kid: fake.kid, privateKey: fake.rootPrivateKey }
  expect(await app.verifyReceipt(receipt(root))).toEqual({ activationId: 'act_1', licenseId: 'olic_1', releasedAt: new Date('2026-11-28T06:00:00.000Z'), kid: fake.kid })
  const signer = makeSigningKey(fake.rootPrivateKey)
  expect((await app.verifyReceipt(receipt(signer))).kid).toBe(signer.kid)
  const refused = (text: string) => app.verifyReceipt(text).then(() => 'verified', (e) => e.code)
  const good = receipt(root)
  const [head, payload, sig] = good.split('.')
  const altered = `${head}.${Buffer.from(JSON.stringify({ ...b64urlJson(payload!), activation_id: 'act_9' })).toString('base64url')}.${sig}`
  expect(await refused(altered)).toBe('invalid_receipt')
  expect(await refused(receipt({ kid: fake.kid, privateKey: generateKeyPairSync('ed25519').privateKey }))).toBe('invalid_receipt')
  expect(await refused(receipt(makeSigningKey(generateKeyPairSync('ed25519').privateKey)))).toBe('invalid_receipt')
  expect(await refused(receipt({ kid: signer.kid, privateKey: signer.privateKey }))).toBe('invalid_receipt') // no certificate, no key set: nothing vouches
  for (const garbage of ['', 'KWRCP1.', 'KWRCP1.a.b', `KWDEA1.${payload}.${sig}`, `${good}.x`]) expect(await refused(garbage)).toBe('invalid_receipt')
  expect(fetches).toBe(0)
})

test('QR output (qrcode-generator behind @keyward/client/qr): text for a terminal and SVG, up to a 2,048-character code', async () => {
  const code = await device().offlineActivationRequest({ key: KEY })
  const text = qrText(code)
  const size = qrSize(code)
  const lines = text.trimEnd().split('\n')
  expect(lines.length).toBe(Math.ceil((size + 4) / 2)) // two module rows per line, margin 2 each side
  expect(lines[1]!.length).toBe(size + 4)
  expect(text).toMatch(/^[█▀▄ \n]+$/)
  const svg = qrSvg(code)
  expect(svg.startsWith('<svg')).toBe(true)
  expect(svg).toContain(`viewBox="0 0 ${size + 8} ${size + 8}"`)
  // The largest request code fits one QR code (version 33 at level L: 149 modules).
  expect(qrSize(`KWREQ1.${'A'.repeat(2041)}`)).toBe(149)
  expect(() => qrText('')).toThrow(TypeError)
})

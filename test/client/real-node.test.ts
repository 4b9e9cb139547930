// The client against a real Keyward node (embedded database, started by the test): offline licenses
// the node issues verify (and every check of docs/api.md, "Offline licenses" refuses what it must), problem+json answers
// become typed errors, and the fingerprint is stable and salted with the product id.
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint as randomFingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { Keyward, KeywardError, memoryStorage } from '../../client/src/index.ts'
import { data } from '../../client/test/support/data'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let publicKey: { raw: string; pem: string }
beforeAll(async () => {
  ;({ token, validateToken, productId, publicKey } = await vendorOn(h))
})

const sdk = (opts: Partial<ConstructorParameters<typeof Keyward>[0]> = {}) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey: publicKey.raw, productId, storage: memoryStorage(), retries: 0, ...opts })

async function issue(deviceFingerprint: string, ttl_seconds = 7200, product = productId) {
  const key = await newKey(h.call, token, product)
  const res = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: deviceFingerprint, ttl_seconds } })
  if (res.status !== 201) throw new Error(`issue failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body as { id: string; license: string; payload: any }
}

test('verifyLicense accepts a license the node issued for this device, with the raw or the PEM key', async () => {
  const kw = sdk()
  const lic = await issue(await kw.fingerprint())
  const result = await kw.verifyLicense(lic.license)
  expect(result).toMatchObject({ valid: true, license: lic.payload })
  expect(result.valid && result.expiresAt.toISOString()).toBe(lic.payload.expires_at)
  expect((await sdk({ publicKey: publicKey.pem }).verifyLicense(lic.license)).valid).toBe(true)
  // The same text re-wrapped at another width, or unwrapped: whitespace inside the block is ignored.
  const unwrapped = lic.license.replace(/\n(?!-----END)/g, '').replace('-----', '\n-----').trim()
  expect((await kw.verifyLicense(lic.license.replace(/\n/g, '\r\n  '))).valid).toBe(true)
  expect((await kw.verifyLicense(unwrapped)).valid).toBe(true)
})

test('verifyLicense refuses another device, another product, an expired license and a clock set back', async () => {
  const kw = sdk()
  const mine = await kw.fingerprint()
  expect(await kw.verifyLicense((await issue(randomFingerprint())).license)).toMatchObject({ valid: false, reason: 'wrong_device' })

  const otherProduct = (await newProduct(h.call, token)).id
  expect(await kw.verifyLicense((await issue(mine, 7200, otherProduct)).license)).toMatchObject({ valid: false, reason: 'wrong_product' })

  const lic = await issue(mine, 3600)
  const expiresAt = Date.parse(lic.payload.expires_at)
  expect(await sdk({ now: () => expiresAt + 1000 }).verifyLicense(lic.license)).toMatchObject({ valid: false, reason: 'expired' })
  // The device clock an hour behind the issue time: issued_at is in its future.
  expect(await sdk({ now: () => Date.now() - 3600_000 }).verifyLicense(lic.license)).toMatchObject({ valid: false, reason: 'clock_set_back' })
  // A clock that was seen later than now (stored), then set back below expiry: the latest time seen wins.
  const storage = memoryStorage()
  let now = expiresAt + 60_000
  const rolled = sdk({ storage, now: () => now })
  expect(await rolled.verifyLicense(lic.license)).toMatchObject({ valid: false, reason: 'expired' })
  now = Date.now()
  expect(await rolled.verifyLicense(lic.license)).toMatchObject({ valid: false, reason: 'clock_set_back' })
})

test('verifyLicense refuses a tampered license, another account\'s license and garbage', async () => {
  const kw = sdk()
  const lic = await issue(await kw.fingerprint())
  const body = lic.license.replace(/-----(BEGIN|END) KEYWARD LICENSE-----/g, '').replace(/\s+/g, '')
  const envelope = JSON.parse(Buffer.from(body, 'base64').toString('utf8'))
  const payload = { ...lic.payload, expires_at: '2099-01-01T00:00:00.000Z' }
  const forged = { ...envelope, enc: Buffer.from(JSON.stringify(payload)).toString('base64') }
  const text = `-----BEGIN KEYWARD LICENSE-----\n${Buffer.from(JSON.stringify(forged)).toString('base64')}\n-----END KEYWARD LICENSE-----\n`
  expect(data(await kw.verifyLicense(text))).toEqual({ valid: false, reason: 'bad_signature' })

  const otherToken = (await h.account()).token
  const otherProductId = (await newProduct(h.call, otherToken)).id
  const otherKey = await newKey(h.call, otherToken, otherProductId)
  const foreign = await h.call('POST', `/v1/keys/${otherKey.id}/offline-licenses`, { token: otherToken, body: { device_fingerprint: await kw.fingerprint() } })
  expect(foreign.status).toBe(201)
  expect(data(await sdk({ productId: otherProductId }).verifyLicense(foreign.body.license))).toEqual({ valid: false, reason: 'bad_signature' })

  for (const junk of ['', 'hello', '-----BEGIN KEYWARD LICENSE-----\n!!!\n-----END KEYWARD LICENSE-----', 'x'.repeat(20_000)]) {
    expect(data(await kw.verifyLicense(junk))).toEqual({ valid: false, reason: 'malformed' })
  }
})

test('problem+json answers from the node become typed errors (401, 403, 404)', async () => {
  const unauthorized = await sdk({ token: 'kw_' + 'A'.repeat(32) }).validate({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' }).catch((e) => e)
  expect(unauthorized).toBeInstanceOf(KeywardError)
  expect(unauthorized).toMatchObject({ code: 'unauthorized', status: 401 })
  expect(unauthorized.requestId).toMatch(/^req_/)
  expect(unauthorized.detail.length).toBeGreaterThan(0)

  const wrongScope = await sdk({ token: await scopedToken(h.call, token, 'keys:read') }).validate({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' }).catch((e) => e)
  expect(wrongScope).toMatchObject({ code: 'insufficient_scope', status: 403 })
  expect(wrongScope.detail).toContain('validate')

  // An unknown key on the devices route: 404 not_found.
  const unknown = await sdk().devices({ key: 'ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ' }).catch((e) => e)
  expect(unknown).toMatchObject({ code: 'not_found', status: 404 })
  expect(unknown.requestId).toMatch(/^req_/)
})

test('fingerprint: 64 hex, stable across instances, salted with the product id, not the raw machine id', async () => {
  const a = await sdk().fingerprint()
  const b = await sdk().fingerprint()
  const other = await sdk({ productId: 'prod_other' }).fingerprint()
  expect(a).toMatch(/^[0-9a-f]{64}$/)
  expect(b).toBe(a)
  expect(other).not.toBe(a)
  if (existsSync('/etc/machine-id')) {
    const id = readFileSync('/etc/machine-id', 'utf8').trim()
    expect(a).toBe(createHash('sha256').update(`keyward-fingerprint/v1\n${productId}\n${id}`).digest('hex'))
    expect(a).not.toBe(createHash('sha256').update(id).digest('hex'))
  }
})

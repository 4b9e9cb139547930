// The relay's certificate and license as the server's own verifiers read them (docs/api.md, "The relay
// license"): a relay certificate never passes for a signing key's, nor the other way round; a relay
// license is never taken for a device's offline license (sync answers invalid).
import { beforeAll, expect, test } from 'bun:test'
import { generateKeyPairSync, sign } from 'node:crypto'
import { makeCertificate, makeRelayCertificate, verifyCertificate, verifyRelayCertificate } from '../../src/modules/signing/certificate'
import { kidOf, rawPublicKey } from '../../src/modules/signing/keys'
import { parseLicense } from '../../src/modules/offline/license'
import { newKey, useHarness } from '../support/harness'
import { offlineAccount } from '../support/offline'
import { createRelay, relayIdentity, requestCode } from '../support/relays'

const pair = () => generateKeyPairSync('ed25519')
const signer = pair()
const relayKey = pair()
const scope = { relay_id: 'rly_01JD7Z3X9K8Q4W2E6R5T1Y0U3I', key_id: 'key_01JD7Z3X9K8Q4W2E6R5T1Y0U3J', seats: 5, expires_at: '2027-01-01T00:00:00.000Z' }
const relayCert = makeRelayCertificate(signer.privateKey, {
  public_key: rawPublicKey(relayKey.publicKey).toString('base64'),
  account_id: 'acct_1',
  created_at: '2026-11-28T00:00:00.000Z',
  scope,
})

test('a relay certificate verifies as one, with its scope, and never as a signing key certificate', () => {
  const got = verifyRelayCertificate(signer.publicKey, relayCert, 'acct_1')
  expect(got).not.toBeNull()
  expect(got!.kid).toBe(scope.relay_id)
  expect(got!.scope).toEqual(scope)
  expect(rawPublicKey(got!.publicKey).equals(rawPublicKey(relayKey.publicKey))).toBe(true)
  expect(verifyCertificate(signer.publicKey, relayCert)).toBeNull()
  expect(verifyRelayCertificate(signer.publicKey, relayCert, 'acct_2')).toBeNull()
  expect(verifyRelayCertificate(pair().publicKey, relayCert)).toBeNull()
  const [prefix, payload, sig] = relayCert.split('.')
  const altered = JSON.parse(Buffer.from(payload!, 'base64url').toString())
  altered.scope.seats = 50
  expect(verifyRelayCertificate(signer.publicKey, `${prefix}.${Buffer.from(JSON.stringify(altered)).toString('base64url')}.${sig}`)).toBeNull()
})

test('a signing key certificate is never a relay certificate; a scope whose relay_id is not the kid is refused', () => {
  const key = pair()
  const cert = makeCertificate(signer.privateKey, {
    kid: kidOf(key.publicKey),
    public_key: rawPublicKey(key.publicKey).toString('base64'),
    account_id: 'acct_1',
    created_at: '2026-11-28T00:00:00.000Z',
  })
  expect(verifyCertificate(signer.publicKey, cert)).not.toBeNull()
  expect(verifyRelayCertificate(signer.publicKey, cert)).toBeNull()
  const mismatched = makeRelayCertificate(signer.privateKey, {
    public_key: rawPublicKey(relayKey.publicKey).toString('base64'),
    account_id: 'acct_1',
    created_at: '2026-11-28T00:00:00.000Z',
    scope,
  }).split('.')
  const body = JSON.parse(Buffer.from(mismatched[1]!, 'base64url').toString())
  body.kid = 'rly_01JD7Z3X9K8Q4W2E6R5T1Y0U3Z'
  const text = `KWCERT1.${Buffer.from(JSON.stringify(body)).toString('base64url')}`
  expect(verifyRelayCertificate(signer.publicKey, `${text}.${sign(null, Buffer.from(text), signer.privateKey).toString('base64url')}`)).toBeNull()
})

const h = useHarness({ socket: false })
let acct: { id: string; token: string }
let productId: string
beforeAll(async () => {
  ;({ acct, productId } = await offlineAccount(h))
}, 60_000)

test("the relay license's envelope reads back with its relay certificate; sync answers it invalid (not a device's license)", async () => {
  const key = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
  const made = await createRelay(h.call, acct.token, key.id, { request: requestCode(relayIdentity()), seats: 1 })
  const parsed = parseLicense(made.body.relay_license)
  expect(parsed).not.toBeNull()
  expect(parsed!.relayCertificate).toMatch(/^KWCERT1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
  const sync = await h.call('POST', '/v1/offline-licenses/sync', { token: acct.token, body: { licenses: [made.body.relay_license] } })
  expect(sync.status).toBe(200)
  expect(sync.body.results[0].status).toBe('invalid')
})

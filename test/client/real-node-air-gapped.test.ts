// Air-gapped activation end to end (docs/integrating.md, "Customers without a network"): a device with
// no network at all (its fetch always fails) and a real node reached only by "the online machine" (the
// test, with the app's validate token, or the product's public page with no token). The device makes a
// request code, the node answers a response code, the device accepts it and checks its license with
// only the pinned root (also after a signing key rotation: the response carries the certificate); the
// device's deactivation code releases the seat on the node, and the device checks the receipt.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint as randomFingerprint, newKey, useHarness } from '../support/harness'
import { Keyward, memoryStorage, OfflineResponseError, type FetchLike, type KeywardStorage } from '../../client/src/index.ts'
import { qrText } from '../../client/src/qr.ts'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let root: string
beforeAll(async () => {
  ;({ token, validateToken, productId, publicKey: { raw: root } } = await vendorOn(h))
})

let fetches = 0
const noNetwork: FetchLike = async () => {
  fetches++
  throw new TypeError('fetch failed: no network')
}

/** The app on an air-gapped device (a computer of its own: its own fingerprint): configured as shipped, but nothing it sends arrives. */
const device = (storage: KeywardStorage = memoryStorage()) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, rootPublicKey: root, productId, storage, retries: 0, fetch: noNetwork, fingerprint: randomFingerprint() })

async function keyDetail(id: string) {
  const res = await h.call('GET', `/v1/keys/${id}`, { token })
  expect(res.status).toBe(200)
  return res.body
}

test('request → response → license on the device; deactivation code → receipt; the seat comes back (validate token)', async () => {
  const key = await newKey(h.call, token, productId, { activation_limit: 1 })
  const app = device()
  const request = await app.offlineActivationRequest({ key: key.key_value, deviceName: 'Ship bridge PC' })
  expect(request.length).toBeLessThanOrEqual(2048)
  expect(qrText(request).length).toBeGreaterThan(0)

  // The online machine: the vendor's page calling the API with the app's validate token.
  const activated = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request, ttl_seconds: 7200 } })
  expect(activated.status).toBe(201)
  expect(activated.body.response).toStartWith('KWRES1.')
  const again = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request } })
  expect(again.status).toBe(200)
  expect(again.body.activation_id).toBe(activated.body.activation_id) // one seat, however often

  const accepted = await app.activateOffline(activated.body.response)
  expect(accepted.license.activation_id).toBe(activated.body.activation_id)
  expect(accepted.license.device_fingerprint).toBe(await app.fingerprint())
  const license = await app.verifyLicense()
  expect(license.valid).toBe(true)
  const detail = await keyDetail(key.id)
  expect(detail.activations_used).toBe(1)
  const seat = detail.activations.find((a: { id: string }) => a.id === activated.body.activation_id)
  expect(seat).toMatchObject({ status: 'active', device_name: 'Ship bridge PC', device_fingerprint: await app.fingerprint() })

  // A renewal (the license nears its end): a new request from the same device finds the same seat,
  // and its response replaces the stored license.
  const renewal = await app.offlineActivationRequest({ key: key.key_value, deviceName: 'Ship bridge PC' })
  const renewed = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request: renewal, ttl_seconds: 86_400 } })
  expect([200, 201]).toContain(renewed.status)
  expect(renewed.body.activation_id).toBe(activated.body.activation_id)
  const replaced = await app.activateOffline(renewed.body.response)
  expect(replaced.license.activation_id).toBe(activated.body.activation_id)
  expect((await keyDetail(key.id)).activations_used).toBe(1)

  // The key's only seat is taken: another device's request is refused as validate would refuse it.
  const other = await device().offlineActivationRequest({ key: key.key_value })
  const refused = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request: other } })
  expect(refused.status).toBe(200)
  expect(refused.body).toEqual({ valid: false, reason: 'activation_limit' })

  // Deactivation: the device gives the seat back with a code only its key can sign.
  const code = await app.offlineDeactivationRequest()
  expect(code).toStartWith('KWDEA1.')
  expect((await app.verifyLicense()).valid).toBe(false)
  const released = await h.call('POST', '/v1/offline/deactivations', { token: validateToken, body: { code } })
  expect(released.status).toBe(200)
  expect(released.body.released).toBe(true)
  const receipt = await app.verifyReceipt(released.body.receipt)
  expect(receipt.activationId).toBe(activated.body.activation_id)
  expect(receipt.licenseId).toBe(replaced.license.id)
  const twice = await h.call('POST', '/v1/offline/deactivations', { token: validateToken, body: { code: await app.offlineDeactivationRequest() } })
  expect(twice.status).toBe(200)
  expect(twice.body.receipt).toBe(released.body.receipt) // the same receipt, counted once
  expect((await keyDetail(key.id)).activations_used).toBe(0)
  // The request code of a released activation is used up.
  expect((await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request } })).status).toBe(409)
  // The other device may now take the seat.
  expect((await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request: other } })).status).toBe(201)

  // An altered deactivation code is refused and releases nothing.
  const [head, payload, sig] = code.split('.')
  const flipped = `${head}.${payload}.${sig!.slice(0, 10)}${sig![10] === 'A' ? 'B' : 'A'}${sig!.slice(11)}`
  expect((await h.call('POST', '/v1/offline/deactivations', { token: validateToken, body: { code: flipped } })).body.code).toBe('invalid_deactivation')
  expect(fetches).toBe(0) // the device never used the network
})

test('after a signing key rotation the response carries the certificate: the device verifies it with only the root', async () => {
  const created = await h.call('POST', '/v1/signing-keys', { token, body: {} })
  expect(created.status).toBe(201)
  expect((await h.call('POST', `/v1/signing-keys/${created.body.kid}/activate`, { token, body: {} })).status).toBe(200)
  const key = await newKey(h.call, token, productId)
  const app = device()
  const request = await app.offlineActivationRequest({ key: key.key_value })
  const activated = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request } })
  expect(activated.status).toBe(201)
  const accepted = await app.activateOffline(activated.body.response)
  expect(accepted.license.kid).toBe(created.body.kid)
  expect((await app.verifyLicense()).valid).toBe(true)
  // A response for another device's request is refused by this one, storing nothing.
  const stranger = device()
  await stranger.offlineActivationRequest({ key: key.key_value })
  const refused = await stranger.activateOffline(activated.body.response).catch((e) => e)
  expect(refused).toBeInstanceOf(OfflineResponseError)
  expect(['wrong_request', 'wrong_device']).toContain(refused.reason)
  const released = await h.call('POST', '/v1/offline/deactivations', { token: validateToken, body: { code: await app.offlineDeactivationRequest() } })
  expect(released.body.released).toBe(true)
  expect(released.body.receipt.split('.').length).toBe(6) // KWRCP1.<payload>.<sig>.KWCERT1.<payload>.<sig>
  expect((await app.verifyReceipt(released.body.receipt)).kid).toBe(created.body.kid)
  // Back to the root for the other tests of this account.
  expect((await h.call('POST', `/v1/signing-keys/${created.body.kid}/revoke`, { token, body: {} })).status).toBe(200)
})

test('the product\'s public page routes: the same exchange with no token once offline_portal is on', async () => {
  const key = await newKey(h.call, token, productId)
  const app = device()
  const request = await app.offlineActivationRequest({ key: key.key_value })
  // Off by default: the page's routes answer 404 like an unknown product.
  expect((await h.call('POST', `/portal/${productId}/offline/activations`, { body: { request } })).status).toBe(404)
  const on = await h.call('PUT', `/v1/products/${productId}`, { token, body: { offline_portal: true } })
  expect(on.status).toBe(200)
  expect(on.body.offline_portal).toBe(true)
  const activated = await h.call('POST', `/portal/${productId}/offline/activations`, { body: { request } })
  expect(activated.status).toBe(201)
  expect((await app.activateOffline(activated.body.response)).valid).toBe(true)
  const released = await h.call('POST', `/portal/${productId}/offline/deactivations`, { body: { code: await app.offlineDeactivationRequest() } })
  expect(released.status).toBe(200)
  expect((await app.verifyReceipt(released.body.receipt)).activationId).toBe(activated.body.activation_id)
  expect((await h.call('PUT', `/v1/products/${productId}`, { token, body: { offline_portal: false } })).status).toBe(200)
})

// What deleting an app's token really does to installed copies that use the SDK (docs/integrating.md,
// "Replacing the embedded token"): the node refuses the token at once (401), but a 401 cannot be signed,
// so the SDK treats it as no answer and runs on its last verified answer, offline, until that answer
// is older than graceSeconds; then validate throws 401. A key revoked while the token still works is
// learned on the next check (grace ends); a key revoked after the token is gone is not heard of.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, scopedToken, useHarness } from '../support/harness'
import { Keyward, memoryStorage, type KeywardError } from '../../client/src/index.ts'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()
let token: string
let productId: string
let publicKey: string
beforeAll(async () => {
  const vendor = await vendorOn(h)
  ;({ token, productId } = vendor)
  publicKey = vendor.publicKey.raw
})

/** A validate token of its own (so deleting it touches no other test), and its id. */
async function appToken() {
  const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'desktop 1.x', scope: 'validate' } })
  expect(created.status).toBe(201)
  return { id: created.body.id as string, value: created.body.token as string }
}
const deleteToken = async (id: string) => expect((await h.call('DELETE', `/v1/api-keys/${id}`, { token })).status).toBe(204)
const GRACE = 3600

test('a deleted token: the app keeps working offline through its grace, then validate fails with 401', async () => {
  const app = await appToken()
  const k = await newKey(h.call, token, productId)
  let offset = 0
  const kw = new Keyward({ baseUrl: h.node.url, token: app.value, publicKey, productId, storage: memoryStorage(), retries: 0, graceSeconds: GRACE, now: () => Date.now() + offset })
  expect(await kw.validate({ key: k.key_value })).toMatchObject({ valid: true, offline: false })
  await deleteToken(app.id)
  // The node refuses the token at once...
  expect((await h.call('POST', '/v1/validate', { token: app.value, body: { key: k.key_value, device_fingerprint: 'ab'.repeat(32) } })).status).toBe(401)
  // ... and the app runs on its stored answer, marked offline.
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
  offset = (GRACE - 60) * 1000
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
  // Past graceSeconds since the last verified answer: the 401 comes through.
  offset = (GRACE + 60) * 1000
  const err = (await kw.validate().catch((e) => e)) as KeywardError
  expect(err.status).toBe(401)
})

test('stopping a leaked token\'s apps sooner: revoke their keys while the token still works, then delete it', async () => {
  const app = await appToken()
  const shared = await newKey(h.call, token, productId)
  const other = await newKey(h.call, token, productId)
  const kwShared = new Keyward({ baseUrl: h.node.url, token: app.value, publicKey, productId, storage: memoryStorage(), retries: 0, graceSeconds: GRACE })
  const kwOther = new Keyward({ baseUrl: h.node.url, token: app.value, publicKey, productId, storage: memoryStorage(), retries: 0, graceSeconds: GRACE })
  expect((await kwShared.validate({ key: shared.key_value })).valid).toBe(true)
  expect((await kwOther.validate({ key: other.key_value })).valid).toBe(true)
  // Revoked while the token works: the app hears it on its next check, and its stored answer is gone.
  expect((await h.call('POST', `/v1/keys/${shared.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect(await kwShared.validate()).toMatchObject({ valid: false, reason: 'revoked', offline: false })
  await deleteToken(app.id)
  expect(((await kwShared.validate().catch((e) => e)) as KeywardError).status).toBe(401) // no grace left to run on
  // A key revoked after the token is gone is not heard of: that app runs out its grace.
  expect((await h.call('POST', `/v1/keys/${other.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect(await kwOther.validate()).toMatchObject({ valid: true, offline: true })
  // A new token (the next release) hears the revocation at once.
  const next = await scopedToken(h.call, token, 'validate')
  const updated = new Keyward({ baseUrl: h.node.url, token: next, publicKey, productId, storage: memoryStorage(), retries: 0 })
  expect(await updated.validate({ key: other.key_value })).toMatchObject({ valid: false, reason: 'revoked' })
})

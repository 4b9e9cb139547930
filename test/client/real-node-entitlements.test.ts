// The SDK against a real node, for the licensing model: a key's entitlements in the signed answer
// (has(), entitlement()), requireEntitlements refused with `missing` (and nothing recorded), a suspended
// key's typed refusal ending grace until it is reinstated, a reissued key's old value, the key's own
// grace after expiry (expired, graceUntil, entitlements kept), the SDK's offline grace keeping them, and
// the entitlements of an offline license the node issued.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, useHarness } from '../support/harness'
import { until } from '../validation/support'
import { Keyward, memoryStorage, UnreachableError, type FetchLike, type KeywardOptions, type ValidateResult } from '../../client/src/index.ts'
import { data } from '../../client/test/support/data'
import { graceSlot } from '../../client/test/support/grace-slot'
import { rejection } from '../../client/test/support/rejection'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let publicKey: string
beforeAll(async () => {
  const vendor = await vendorOn(h)
  ;({ token, validateToken, productId } = vendor)
  publicKey = vendor.publicKey.raw
})

const sdk = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey, productId, storage: memoryStorage(), retries: 0, backoffMs: 1, ...opts })
const key = (extra: Record<string, unknown> = {}) => newKey(h.call, token, productId, { plan: 'pro', ...extra }) as Promise<{ id: string; key_value: string }>
const keyDetail = async (id: string) => (await h.call('GET', `/v1/keys/${id}`, { token })).body
const PRO = { export: true, projects: 5, tier: 'pro' }

function mustBeValid(r: ValidateResult) {
  if (!r.valid) throw new Error(`expected a valid answer, got ${r.reason}`)
  return r
}

/** A fetch that can be cut: `down.on = true` makes every call a network error. */
function cuttable() {
  const down = { on: false }
  const fetch: FetchLike = (input, init) => (down.on ? Promise.reject(new TypeError('fetch failed')) : globalThis.fetch(input, init))
  return { down, fetch }
}

test('a key\'s entitlements come in the signed answer: has(), entitlement(); requireEntitlements met is valid, unmet is entitlements_missing with `missing` and records nothing', async () => {
  const k = await key({ entitlements: PRO })
  const kw = sdk()
  // Refused first, on a new device: no activation is recorded.
  const refused = await kw.validate({ key: k.key_value, requireEntitlements: ['sso', 'export', 'audit'] })
  expect(data(refused)).toEqual({ valid: false, reason: 'entitlements_missing', missing: ['sso', 'audit'], offline: false, signedAt: expect.any(Date) })
  expect(refused.has('export')).toBe(false)
  expect((await keyDetail(k.id)).activations_used).toBe(0)

  const r = mustBeValid(await kw.validate({ requireEntitlements: ['export', 'projects'] }))
  expect(r).toMatchObject({ valid: true, plan: 'pro', entitlements: PRO, expired: false, graceUntil: null, activationsUsed: 1 })
  expect([r.has('export'), r.has('tier'), r.has('sso'), r.entitlement('projects'), r.entitlement('tier'), r.entitlement('sso')]).toEqual([true, true, false, 5, 'pro', undefined])

  // The vendor takes `export` away: in force at the next validate.
  expect((await h.call('PATCH', `/v1/keys/${k.id}`, { token, body: { entitlements: { projects: 5 } } })).status).toBe(200)
  const after = await kw.validate({ requireEntitlements: ['export'] })
  expect(after).toMatchObject({ valid: false, reason: 'entitlements_missing', missing: ['export'] })
  const plain = mustBeValid(await kw.validate())
  expect([plain.has('export'), plain.entitlement('projects')]).toEqual([false, 5])

  // A key without entitlements answers {}.
  const bare = mustBeValid(await sdk().validate({ key: (await key()).key_value }))
  expect(bare.entitlements).toEqual({})
  expect(bare.has('export')).toBe(false)
})

test('a suspended key is a typed refusal that ends grace; reinstated it is valid again; reissued, the old value is not_found and the new one keeps the entitlements', async () => {
  const k = await key({ entitlements: PRO })
  const net = cuttable()
  const kw = sdk({ fetch: net.fetch, graceSeconds: 3600 })
  mustBeValid(await kw.validate({ key: k.key_value }))
  expect(await kw.storage.get(graceSlot(k.key_value, productId))).not.toBeNull()

  expect((await h.call('POST', `/v1/keys/${k.id}/suspend`, { token, body: { reason: 'chargeback' } })).status).toBe(200)
  const suspended = await kw.validate()
  expect(data(suspended)).toEqual({ valid: false, reason: 'suspended', offline: false, signedAt: expect.any(Date) })
  // The stored answer is gone: no offline use of a suspended key.
  expect(await kw.storage.get(graceSlot(k.key_value, productId))).toBeNull()
  net.down.on = true
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
  net.down.on = false

  expect((await h.call('POST', `/v1/keys/${k.id}/reinstate`, { token })).status).toBe(200)
  expect(mustBeValid(await kw.validate()).has('export')).toBe(true)

  const reissued = await h.call('POST', `/v1/keys/${k.id}/reissue`, { token })
  expect(reissued.status).toBe(200)
  expect(await kw.validate()).toMatchObject({ valid: false, reason: 'not_found' })
  const fresh = mustBeValid(await kw.validate({ key: reissued.body.key_value }))
  expect(fresh).toMatchObject({ entitlements: PRO, activationsUsed: 1 }) // the same key: its device and entitlements stay
})

test('the key\'s own grace after expiry: valid, expired, graceUntil = expires_at + grace_seconds, entitlements kept; after_expiry keep: expired with no graceUntil', async () => {
  const expiresAt = new Date(Date.now() + 2500)
  const inGrace = await key({ entitlements: PRO, expires_at: expiresAt.toISOString(), grace_seconds: 3600 })
  const kept = await key({ entitlements: { updates: true }, expires_at: expiresAt.toISOString(), after_expiry: 'keep' })
  const before = mustBeValid(await sdk().validate({ key: inGrace.key_value }))
  expect(before).toMatchObject({ expired: false, expiresAt, graceUntil: new Date(expiresAt.getTime() + 3600_000) })
  await until(async () => Date.now() > expiresAt.getTime() + 200, Boolean, 10_000)

  const grace = mustBeValid(await sdk().validate({ key: inGrace.key_value, requireEntitlements: ['export'] }))
  expect(grace).toMatchObject({ valid: true, expired: true, expiresAt, graceUntil: new Date(expiresAt.getTime() + 3600_000), entitlements: PRO })
  expect(grace.has('export')).toBe(true)

  const after = mustBeValid(await sdk().validate({ key: kept.key_value }))
  expect(after).toMatchObject({ valid: true, expired: true, expiresAt, graceUntil: null })
  expect(after.has('updates')).toBe(true)
})

test('the SDK\'s offline grace keeps the stored answer\'s entitlements, and checks a requirement against them', async () => {
  const k = await key({ entitlements: { export: true } })
  const net = cuttable()
  const kw = sdk({ fetch: net.fetch, graceSeconds: 3600 })
  const online = mustBeValid(await kw.validate({ key: k.key_value }))
  net.down.on = true
  const offline = mustBeValid(await kw.validate({ requireEntitlements: ['export'] }))
  expect(data(offline)).toEqual(data({ ...online, offline: true }))
  expect(offline.has('export')).toBe(true)
  const more = await kw.validate({ requireEntitlements: ['export', 'sso'] })
  expect(data(more)).toEqual({ valid: false, reason: 'entitlements_missing', missing: ['sso'], offline: true, signedAt: online.signedAt })
})

test('verifyLicense: an offline license the node issued carries the key\'s entitlements', async () => {
  const k = await key({ entitlements: PRO })
  const kw = sdk()
  const res = await h.call('POST', `/v1/keys/${k.id}/offline-licenses`, { token, body: { device_fingerprint: await kw.fingerprint() } })
  expect(res.status).toBe(201)
  const r = await kw.verifyLicense(res.body.license)
  expect(r).toMatchObject({ valid: true, entitlements: PRO })
  expect([r.has('export'), r.entitlement('projects'), r.has('sso')]).toEqual([true, 5, false])
})

test('a key of a policy: the policy\'s entitlements merged with the key\'s own (null removes one), has() on the effective set; a policy edit is in the next answer', async () => {
  const created = await h.call('POST', '/v1/policies', { token, body: { product_id: productId, name: 'Pro, yearly', plan: 'pro', duration: 'P1Y', entitlements: { export: true, projects: 5 } } })
  expect(created.status).toBe(201)
  const policyId = created.body.id as string
  const plain = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policyId } })).body
  const custom = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policyId, entitlements: { sso: true, export: null } } })).body

  const a = mustBeValid(await sdk().validate({ key: plain.key_value }))
  expect(a).toMatchObject({ plan: 'pro', policyId, entitlements: { export: true, projects: 5 }, expired: false, graceUntil: null })
  expect(a.expiresAt!.getTime()).toBe(new Date(plain.expires_at).getTime())
  expect([a.has('export'), a.entitlement('projects'), a.has('sso')]).toEqual([true, 5, false])

  const b = mustBeValid(await sdk().validate({ key: custom.key_value }))
  expect(b.entitlements).toEqual({ projects: 5, sso: true })
  expect([b.has('export'), b.has('sso')]).toEqual([false, true])
  expect(await sdk().validate({ key: custom.key_value, requireEntitlements: ['sso', 'export'] })).toMatchObject({ valid: false, reason: 'entitlements_missing', missing: ['export'] })

  // The vendor adds `api` to the tier: every key of the policy answers it at the next validate.
  expect((await h.call('PATCH', `/v1/policies/${policyId}`, { token, body: { entitlements: { export: true, projects: 5, api: true } } })).status).toBe(200)
  expect(mustBeValid(await sdk().validate({ key: plain.key_value, requireEntitlements: ['api'] })).entitlement('api')).toBe(true)
  expect(mustBeValid(await sdk().validate({ key: custom.key_value })).entitlements).toEqual({ projects: 5, api: true, sso: true })
})

test('a trial policy (14 days from first launch, one per machine): the first validate sets the expiry; another key of it on the same machine is device_already_used, typed', async () => {
  const created = await h.call('POST', '/v1/policies', {
    token,
    body: { product_id: productId, name: 'Trial 14 days', plan: 'trial', activation_limit: 1, duration: 'P14D', expiry_basis: 'first_activation', one_key_per_device: true },
  })
  expect(created.status).toBe(201)
  const first = (await h.call('POST', '/v1/keys', { token, body: { policy_id: created.body.id } })).body
  const second = (await h.call('POST', '/v1/keys', { token, body: { policy_id: created.body.id } })).body
  expect(first).toMatchObject({ expires_at: null, expiry_pending: true })
  const kw = sdk()
  const before = Date.now()
  const trial = mustBeValid(await kw.validate({ key: first.key_value }))
  expect(trial).toMatchObject({ plan: 'trial', policyId: created.body.id, expired: false, entitlements: {} })
  const day14 = 14 * 86_400_000
  expect(trial.expiresAt!.getTime()).toBeGreaterThanOrEqual(before + day14 - 1000)
  expect(trial.expiresAt!.getTime()).toBeLessThanOrEqual(Date.now() + day14 + 1000)
  const again = await kw.validate({ key: second.key_value })
  expect(data(again)).toEqual({ valid: false, reason: 'device_already_used', offline: false, signedAt: expect.any(Date) })
})

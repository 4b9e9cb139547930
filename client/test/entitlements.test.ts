// Entitlements and the licensing model's answers, against the fake signing server: what a valid answer
// unlocks (entitlements, has(), entitlement()), expired/graceUntil, require_entitlements and its typed
// refusal with `missing`, a suspended key's refusal ending grace, the stored answer's entitlements
// during grace (and a requirement checked against them), and offline licenses' entitlements.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { Keyward, memoryStorage, UnreachableError, type KeywardOptions, type ValidateResult } from '../src/index.ts'
import { startFakeServer, type FakeServer } from './support/fake-server'
import { graceSlot } from './support/grace-slot'
import { rejection } from './support/rejection'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const FP = 'a'.repeat(64)
const PRO = { export: true as const, projects: 5, tier: 'pro' }
const valid = (extra: Record<string, unknown> = {}) => ({
  valid: true,
  plan: 'pro',
  expires_at: null,
  activations_used: 1,
  activation_limit: 3,
  policy_id: 'pol_pro',
  entitlements: PRO,
  expired: false,
  grace_until: null,
  ...extra,
})

let fake: FakeServer
beforeAll(() => {
  fake = startFakeServer()
})
afterAll(() => fake.stop())
beforeEach(() => {
  fake.mode = 'ok'
  fake.script = []
  fake.requests = []
  fake.devices = []
  fake.errorAnswer = null
  fake.validateAnswer = valid()
})

const client = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: fake.url, token: 'kw_test', publicKey: fake.publicKeyRaw, fingerprint: FP, backoffMs: 1, retries: 0, storage: memoryStorage(), ...opts })

function mustBeValid(r: ValidateResult) {
  if (!r.valid) throw new Error(`expected a valid answer, got ${r.reason}`)
  return r
}

test('a valid answer carries the key\'s entitlements: has() and entitlement() read them; not expired, no grace', async () => {
  const r = mustBeValid(await client().validate({ key: KEY }))
  expect(r).toMatchObject({ valid: true, policyId: 'pol_pro', entitlements: PRO, expired: false, graceUntil: null, offline: false })
  expect([r.has('export'), r.has('projects'), r.has('tier'), r.has('sso'), r.has('toString'), r.has('__proto__')]).toEqual([true, true, true, false, false, false])
  expect([r.entitlement('export'), r.entitlement('projects'), r.entitlement('tier'), r.entitlement('sso'), r.entitlement('constructor')]).toEqual([true, 5, 'pro', undefined, undefined])
  // The lookups are methods, not data: the result serialises and compares as the answer's fields.
  expect(Object.keys(r)).not.toContain('has')
  expect(JSON.parse(JSON.stringify(r)).entitlements).toEqual(PRO)
  expect(Object.isFrozen(r.entitlements)).toBe(true)
})

test('a key without entitlements answers {}: has() is false for any code', async () => {
  fake.validateAnswer = valid({ entitlements: {} })
  const r = mustBeValid(await client().validate({ key: KEY }))
  expect(r.entitlements).toEqual({})
  expect(r.has('export')).toBe(false)
  expect(r.entitlement('export')).toBeUndefined()
})

test('in grace after expiry: expired is true and graceUntil the end of grace; kept after expiry: expired with no graceUntil', async () => {
  fake.validateAnswer = valid({ expires_at: '2026-11-20T00:00:00.000Z', expired: true, grace_until: '2026-11-27T00:00:00.000Z' })
  const grace = mustBeValid(await client().validate({ key: KEY }))
  expect(grace).toMatchObject({ expired: true, expiresAt: new Date('2026-11-20T00:00:00.000Z'), graceUntil: new Date('2026-11-27T00:00:00.000Z') })
  fake.validateAnswer = valid({ expires_at: '2025-11-20T00:00:00.000Z', expired: true, grace_until: null })
  expect(await client().validate({ key: KEY })).toMatchObject({ valid: true, expired: true, graceUntil: null })
})

test('requireEntitlements is sent as require_entitlements (left out when empty); a non-array is a TypeError', async () => {
  const kw = client({ productId: 'prod_X' })
  await kw.validate({ key: KEY, requireEntitlements: ['export', 'projects'] })
  await kw.validate({ requireEntitlements: [] })
  await kw.validate()
  expect(fake.requests.map((r) => r.body.require_entitlements)).toEqual([['export', 'projects'], undefined, undefined])
  expect(fake.requests[0].body).toEqual({ key: KEY, device_fingerprint: FP, product_id: 'prod_X', require_entitlements: ['export', 'projects'] })
  expect(await rejection(kw.validate({ requireEntitlements: 'export' as unknown as string[] }))).toBeInstanceOf(TypeError)
  expect(await rejection(kw.validate({ requireEntitlements: [1] as unknown as string[] }))).toBeInstanceOf(TypeError)
  expect(fake.requests).toHaveLength(3) // nothing sent for the bad calls
})

test('entitlements_missing is a typed refusal with `missing` in request order; it does not end grace', async () => {
  const kw = client({ graceSeconds: 3600 })
  mustBeValid(await kw.validate({ key: KEY }))
  fake.validateAnswer = { valid: false, reason: 'entitlements_missing', missing: ['sso', 'audit'] }
  const r = await kw.validate({ requireEntitlements: ['sso', 'export', 'audit'] })
  expect(r).toMatchObject({ valid: false, reason: 'entitlements_missing', missing: ['sso', 'audit'], offline: false })
  if (r.valid || r.reason !== 'entitlements_missing') throw new Error('expected entitlements_missing')
  const missing: string[] = r.missing // typed on this reason
  expect(missing).toEqual(['sso', 'audit'])
  expect([r.has('export'), r.entitlement('export')]).toEqual([false, undefined]) // a refusal unlocks nothing
  // The key itself is fine: the stored answer still stands in when the service is away.
  expect(await kw.storage.get(graceSlot(KEY))).not.toBeNull()
  fake.mode = 'down'
  const offline = mustBeValid(await kw.validate())
  expect(offline).toMatchObject({ offline: true, entitlements: PRO })
})

test('suspended is a typed refusal and ends grace (the stored answer is forgotten)', async () => {
  const kw = client({ graceSeconds: 3600 })
  mustBeValid(await kw.validate({ key: KEY }))
  fake.validateAnswer = { valid: false, reason: 'suspended' }
  const r = await kw.validate()
  expect(r).toMatchObject({ valid: false, reason: 'suspended', offline: false })
  expect('missing' in r).toBe(false)
  expect(r.has('export')).toBe(false)
  expect(await kw.storage.get(graceSlot(KEY))).toBeNull()
  fake.mode = 'down'
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
})

test('during grace the stored answer keeps its entitlements, expired and graceUntil; a requirement is checked against them', async () => {
  fake.validateAnswer = valid({ expires_at: '2026-11-20T00:00:00.000Z', expired: true, grace_until: '2026-11-27T00:00:00.000Z' })
  const kw = client({ graceSeconds: 3600 })
  const online = mustBeValid(await kw.validate({ key: KEY, requireEntitlements: ['export'] }))
  fake.mode = 'down'
  const offline = mustBeValid(await kw.validate())
  expect(offline).toEqual({ ...online, offline: true })
  expect([offline.has('export'), offline.entitlement('projects'), offline.has('sso')]).toEqual([true, 5, false])
  // Asked for what the stored answer lists: valid offline. Asked for more: refused from the stored answer, offline.
  expect(await kw.validate({ requireEntitlements: ['tier', 'export'] })).toMatchObject({ valid: true, offline: true })
  const more = await kw.validate({ requireEntitlements: ['sso', 'export', 'audit'] })
  expect(more).toMatchObject({ valid: false, reason: 'entitlements_missing', missing: ['sso', 'audit'], offline: true, signedAt: online.signedAt })
  // That local refusal forgets nothing: the next plain call still stands on the stored answer.
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
  expect(fake.requests.at(-1)!.body.require_entitlements).toBeUndefined()
})

test('a stored answer signed before entitlements existed reads as none, not expired, no grace end', async () => {
  fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
  const kw = client({ graceSeconds: 3600 })
  await kw.validate({ key: KEY })
  fake.mode = 'down'
  const r = mustBeValid(await kw.validate())
  expect(r).toMatchObject({ offline: true, policyId: null, entitlements: {}, expired: false, graceUntil: null })
  expect(r.has('export')).toBe(false)
  expect(await kw.validate({ requireEntitlements: ['export'] })).toMatchObject({ valid: false, reason: 'entitlements_missing', missing: ['export'], offline: true })
})

const payload = (extra: Record<string, unknown> = {}) => ({
  v: 1,
  id: 'lic_01JD7Z3X9K8Q4W2E6R5T1Y0U3I',
  account_id: 'acc_X',
  key_id: 'key_X',
  product_id: 'prod_X',
  plan: 'pro',
  device_fingerprint: FP,
  issued_at: new Date(Date.now() - 60_000).toISOString(),
  expires_at: new Date(Date.now() + 86_400_000).toISOString(),
  ...extra,
})

test('verifyLicense: the offline license\'s entitlements, with has() and entitlement(); none in an older license; nothing on a refused one', async () => {
  const kw = client({ productId: 'prod_X' })
  const r = await kw.verifyLicense(fake.license(payload({ entitlements: PRO })))
  if (!r.valid) throw new Error(`expected a valid license, got ${r.reason}`)
  expect(r.entitlements).toEqual(PRO)
  expect(r.license.entitlements).toEqual(PRO)
  expect([r.has('export'), r.entitlement('projects'), r.has('sso'), r.entitlement('sso')]).toEqual([true, 5, false, undefined])

  const older = await kw.verifyLicense(fake.license(payload()))
  expect(older).toMatchObject({ valid: true, entitlements: {} })
  expect(older.has('export')).toBe(false)

  const other = await kw.verifyLicense(fake.license(payload({ entitlements: PRO, device_fingerprint: 'b'.repeat(64) })))
  expect(other).toMatchObject({ valid: false, reason: 'wrong_device' })
  expect([other.has('export'), other.entitlement('export')]).toEqual([false, undefined])

  expect(await kw.verifyLicense(fake.license(payload({ entitlements: ['export'] })))).toMatchObject({ valid: false, reason: 'malformed' })
})

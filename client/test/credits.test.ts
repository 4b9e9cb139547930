// Metered keys in the SDK, against the fake signing server: validate({ cost }) sends the cost,
// result.creditsRemaining, the typed credits_exhausted refusal with refillsAt (which keeps the stored
// answer), and the rule that a metered call spending credits never falls back to a stored answer.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { Keyward, memoryStorage, UnreachableError, type KeywardOptions, type ValidateResult } from '../src/index.ts'
import { startFakeServer, type FakeServer } from './support/fake-server'
import { graceSlot } from './support/grace-slot'
import { rejection } from './support/rejection'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const FP = 'b'.repeat(64)
const valid = (extra: Record<string, unknown> = {}) => ({
  valid: true,
  plan: 'pro',
  expires_at: null,
  activations_used: 1,
  activation_limit: 3,
  policy_id: null,
  entitlements: {},
  expired: false,
  grace_until: null,
  credits_remaining: null,
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

test('validate({ cost }) sends the cost; a metered answer carries creditsRemaining, an unmetered one null', async () => {
  fake.validateAnswer = valid({ credits_remaining: 41 })
  const kw = client()
  expect(mustBeValid(await kw.validate({ key: KEY, cost: 3 })).creditsRemaining).toBe(41)
  expect(fake.requests.at(-1)!.body.cost).toBe(3)
  await kw.validate({ cost: 0 })
  expect(fake.requests.at(-1)!.body.cost).toBe(0)
  await kw.validate()
  expect('cost' in fake.requests.at(-1)!.body).toBe(false) // the service's default (1)
  fake.validateAnswer = valid()
  expect(mustBeValid(await kw.validate()).creditsRemaining).toBeNull()
})

test('a cost that is not an integer 0..1,000,000 is a TypeError, and nothing is sent', async () => {
  const kw = client({ key: KEY })
  for (const cost of [-1, 1.5, 1_000_001, Number.NaN]) expect(await rejection(kw.validate({ cost }))).toBeInstanceOf(TypeError)
  expect(fake.requests.length).toBe(0)
})

test('credits_exhausted is a typed refusal with creditsRemaining and refillsAt, and keeps the stored answer', async () => {
  fake.validateAnswer = valid({ credits_remaining: 2 })
  const kw = client({ graceSeconds: 3600 })
  mustBeValid(await kw.validate({ key: KEY }))
  fake.validateAnswer = { valid: false, reason: 'credits_exhausted', credits_remaining: 2, refills_at: '2026-12-01T00:00:00.000Z' }
  const r = await kw.validate({ cost: 5 })
  expect(r).toMatchObject({ valid: false, reason: 'credits_exhausted', creditsRemaining: 2, offline: false })
  if (r.valid || r.reason !== 'credits_exhausted') throw new Error('expected credits_exhausted')
  const refillsAt: Date | null = r.refillsAt // typed on this reason
  expect(refillsAt).toEqual(new Date('2026-12-01T00:00:00.000Z'))
  expect(r.has('export')).toBe(false)
  fake.validateAnswer = { valid: false, reason: 'credits_exhausted', credits_remaining: 0, refills_at: null }
  expect(await kw.validate()).toMatchObject({ reason: 'credits_exhausted', creditsRemaining: 0, refillsAt: null })
  // the key is not bad, only spent: its stored answer stays
  expect(await kw.storage.get(graceSlot(KEY))).not.toBeNull()
})

test('a metered validate that spends never falls back to the stored answer; cost 0 may, and an unmetered key does', async () => {
  fake.validateAnswer = valid({ credits_remaining: 10 })
  const kw = client({ graceSeconds: 3600 })
  mustBeValid(await kw.validate({ key: KEY }))
  fake.mode = 'down'
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError) // default cost 1
  expect(await rejection(kw.validate({ cost: 4 }))).toBeInstanceOf(UnreachableError)
  expect(await kw.validate({ cost: 0 })).toMatchObject({ valid: true, offline: true, creditsRemaining: 10 })

  fake.mode = 'ok'
  fake.validateAnswer = valid()
  const plain = client({ graceSeconds: 3600, fingerprint: 'c'.repeat(64) })
  mustBeValid(await plain.validate({ key: KEY }))
  fake.mode = 'down'
  expect(await plain.validate({ cost: 5 })).toMatchObject({ valid: true, offline: true, creditsRemaining: null })
})

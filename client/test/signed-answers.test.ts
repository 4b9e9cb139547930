// Signed answers v3 (docs/api.md, "Signed answers") against the fake signing server: the answer is
// bound to the exact request sent, so a proxy that swaps the key, the device or any field while it
// forwards the nonce is caught; an unsigned or forged answer of any status is a SignatureError (never
// the forger's code or a 429 wait) and counts as no answer for grace; a device clock that is off is
// its own error; small backward clock steps keep grace; products sharing one storage keep their own.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { ClockSkewError, Keyward, KeywardError, memoryStorage, RateLimitedError, SignatureError, UnreachableError, type FetchLike, type KeywardOptions } from '../src/index.ts'
import { startFakeServer, type FakeServer } from './support/fake-server'
import { graceSlot } from './support/grace-slot'
import { rejection } from './support/rejection'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const BOUGHT = 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012'
const FP = 'a'.repeat(64)
const OTHER_FP = 'b'.repeat(64)
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
  fake.retryAfter = 1
  fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
})

const client = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: fake.url, token: 'kw_test', publicKey: fake.publicKeyRaw, fingerprint: FP, backoffMs: 1, retries: 0, storage: memoryStorage(), ...opts })

/** A proxy on the way: rewrites the request body's JSON, forwards everything else (the nonce included). */
const rewriting = (change: (body: Record<string, unknown>) => void): FetchLike => (input, init) => {
  const body = JSON.parse(String(init.body))
  change(body)
  return fetch(input, { ...init, body: JSON.stringify(body) })
}

test('a proxy that swaps the key, the device or any field of the request (nonce forwarded) gets a SignatureError', async () => {
  const swaps: Record<string, (b: Record<string, unknown>) => void> = {
    key: (b) => void (b.key = BOUGHT),
    device: (b) => void (b.device_fingerprint = OTHER_FP),
    app_version: (b) => void (b.app_version = '9.9.9'),
    product: (b) => void (b.product_id = 'prod_other'),
    whitespace: () => {}, // re-serialised without change: the same bytes, still genuine
  }
  for (const [name, swap] of Object.entries(swaps)) {
    const kw = client({ productId: 'prod_X', fetch: rewriting(swap) })
    const outcome = await kw.validate({ key: KEY, appVersion: '1.0.0' }).then(
      (r) => `valid=${r.valid}`,
      (e) => (e instanceof SignatureError ? e.code : `other ${e}`),
    )
    expect({ name, outcome }).toEqual({ name, outcome: name === 'whitespace' ? 'valid=true' : 'bad_signature' })
  }
  // The server signed what it received: the swapped key, with the nonce the client sent.
  expect(fake.requests[0]).toMatchObject({ body: { key: BOUGHT } })
})

test('devices and deactivate answers are bound to their request too', async () => {
  const kw = client({ key: KEY, fetch: rewriting((b) => void (b.key = BOUGHT)) })
  expect((await rejection(kw.devices())).code).toBe('bad_signature')
  expect((await rejection(kw.deactivate(OTHER_FP))).code).toBe('bad_signature')
})

test('a stored grace answer of another key or another device is not used, even in this key\'s slot', async () => {
  const storage = memoryStorage()
  await client({ storage }).validate({ key: BOUGHT }) // a genuine answer, for the bought key
  await client({ storage, fingerprint: OTHER_FP }).validate({ key: KEY }) // a genuine answer, for another device
  const otherDevice = (await storage.get(graceSlot(KEY)))!
  fake.mode = 'down'
  // Another device's answer for this key: no grace here.
  expect(await rejection(client({ storage }).validate({ key: KEY }))).toBeInstanceOf(UnreachableError)
  // The bought key's answer copied into this key's slot: no grace either.
  await storage.set(graceSlot(KEY), (await storage.get(graceSlot(BOUGHT)))!)
  expect(await rejection(client({ storage }).validate({ key: KEY }))).toBeInstanceOf(UnreachableError)
  // A stored request edited to name this key and device: its digest no longer matches the signature.
  const stored = JSON.parse(otherDevice)
  await storage.set(graceSlot(KEY), JSON.stringify({ ...stored, request: stored.request.replace(OTHER_FP, FP) }))
  expect(await rejection(client({ storage }).validate({ key: KEY }))).toBeInstanceOf(UnreachableError)
  // The genuine one stands in for its own device.
  await storage.set(graceSlot(KEY), otherDevice)
  expect(await client({ storage, fingerprint: OTHER_FP }).validate({ key: KEY })).toMatchObject({ valid: true, offline: true })
})

const ERROR_STATUSES = [400, 402, 403, 404, 409, 422, 429, 500, 502, 503]

test('with a public key, an unsigned or forged error answer of any status is a SignatureError, never the forger\'s code', async () => {
  for (const mode of ['unsigned', 'wrong_key', 'changed_body'] as const) {
    for (const status of ERROR_STATUSES) {
      fake.mode = mode
      fake.errorAnswer = { status, code: 'forged_code' }
      fake.retryAfter = 3600
      let slept = 0
      const err = await rejection(client({ waitOnRateLimit: true, sleep: async (ms) => void (slept += ms) }).validate({ key: KEY }))
      const seen = { mode, status, signatureError: err instanceof SignatureError, rateLimited: err instanceof RateLimitedError, code: err.code, errStatus: err.status, slept }
      expect(seen).toEqual({ mode, status, signatureError: true, rateLimited: false, code: 'bad_signature', errStatus: status, slept: 0 })
    }
  }
})

test('genuine signed error answers keep their code and status', async () => {
  for (const status of [400, 403, 404, 409]) {
    fake.errorAnswer = { status, code: `code_${status}` }
    expect(await rejection(client().validate({ key: KEY }))).toMatchObject({ code: `code_${status}`, status, signed: true })
  }
  fake.errorAnswer = { status: 503, code: 'unavailable' }
  expect(await rejection(client().validate({ key: KEY }))).toMatchObject({ code: 'unreachable', status: 503, signed: true })
})

test('grace: an unsigned or forged answer of any status counts as no answer, as a network failure does', async () => {
  const storage = memoryStorage()
  await client({ storage }).validate({ key: KEY })
  for (const mode of ['unsigned', 'wrong_key'] as const) {
    for (const status of ERROR_STATUSES) {
      fake.mode = mode
      fake.errorAnswer = { status, code: 'forged_code' }
      expect({ mode, status, result: await client({ storage }).validate({ key: KEY }) }).toMatchObject({ mode, status, result: { valid: true, offline: true } })
    }
  }
  fake.errorAnswer = null
  fake.mode = 'gateway502' // an unsigned 502 from a proxy in front: grace, and without grace a SignatureError
  expect(await client({ storage }).validate({ key: KEY })).toMatchObject({ valid: true, offline: true })
  expect(await rejection(client().validate({ key: KEY }))).toMatchObject({ code: 'bad_signature', status: 502 })
  // A genuine refusal-type error (403 signed) is the service speaking: no grace.
  fake.mode = 'ok'
  fake.errorAnswer = { status: 403, code: 'insufficient_scope' }
  expect(await rejection(client({ storage }).validate({ key: KEY }))).toMatchObject({ code: 'insufficient_scope', signed: true })
})

test('a device clock more than 5 minutes off is a ClockSkewError (clock_skew), not a forged answer', async () => {
  for (const offset of [6 * 60_000, -6 * 60_000, 3 * 3_600_000]) {
    const err = await rejection(client({ now: () => Date.now() + offset }).validate({ key: KEY }))
    expect(err).toBeInstanceOf(ClockSkewError)
    expect(err).not.toBeInstanceOf(SignatureError)
    expect(err).toMatchObject({ code: 'clock_skew', signed: true })
    expect(err.detail).toContain(offset > 0 ? 'ahead of' : 'behind')
  }
  expect((await client({ now: () => Date.now() + 4 * 60_000 }).validate({ key: KEY })).valid).toBe(true)
  // A forgery with a far-off time is still a forgery (the signature is checked first).
  fake.mode = 'wrong_key'
  expect((await rejection(client({ now: () => Date.now() + 3 * 3_600_000 }).validate({ key: KEY }))).code).toBe('bad_signature')
})

test('a small backward clock step (2 s) keeps grace', async () => {
  let now = Date.now()
  const kw = client({ now: () => now })
  await kw.validate({ key: KEY })
  now += 10_000
  fake.mode = 'down'
  expect((await kw.validate()).offline).toBe(true)
  now -= 2_000 // an NTP correction
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
})

test('two products sharing one storage keep their own grace', async () => {
  const storage = memoryStorage()
  const a = client({ storage, productId: 'prod_A' })
  const b = client({ storage, productId: 'prod_B', fingerprint: OTHER_FP })
  await a.validate({ key: KEY })
  await b.validate({ key: BOUGHT })
  fake.mode = 'down'
  expect(await a.validate()).toMatchObject({ valid: true, offline: true })
  expect(await b.validate()).toMatchObject({ valid: true, offline: true })
  // A refusal of one product's key leaves the other's answer.
  fake.mode = 'ok'
  fake.validateAnswer = { valid: false, reason: 'revoked' }
  expect((await a.validate()).valid).toBe(false)
  fake.mode = 'down'
  expect(await rejection(a.validate())).toBeInstanceOf(KeywardError)
  expect(await b.validate()).toMatchObject({ valid: true, offline: true })
})

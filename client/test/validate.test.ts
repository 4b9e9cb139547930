// The client against a fake signing server: verified answers, forgeries rejected, grace when the
// service is away (and refused when the clock went back or after a refusal), retries, 429, timeouts,
// typed errors, the devices screen and the heartbeat.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileStorage, Keyward, KeywardError, memoryStorage, RateLimitedError, SignatureError, UnreachableError, type KeywardOptions } from '../src/index.ts'
import { rawKey, startFakeServer, type FakeServer } from './support/fake-server'
import { graceSlot } from './support/grace-slot'
import { rejection } from './support/rejection'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const FP = 'a'.repeat(64)
let fake: FakeServer
let dir: string
beforeAll(() => {
  fake = startFakeServer()
  dir = mkdtempSync(join(tmpdir(), 'keyward-client-'))
})
afterAll(async () => {
  await fake.stop()
  rmSync(dir, { recursive: true, force: true })
})
beforeEach(() => {
  fake.mode = 'ok'
  fake.script = []
  fake.requests = []
  fake.devices = []
  fake.errorAnswer = null
  fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
})

function client(opts: Partial<KeywardOptions> = {}) {
  return new Keyward({ baseUrl: fake.url, token: 'kw_test', publicKey: fake.publicKeyRaw, fingerprint: FP, backoffMs: 1, storage: memoryStorage(), ...opts })
}

test('a signed valid answer is verified and typed; the request carries a fresh nonce and the fields', async () => {
  const kw = client({ productId: 'prod_X' })
  const a = await kw.validate({ key: KEY, deviceName: "Alice's laptop", appVersion: '3.2.1' })
  const b = await kw.validate()
  expect(a).toMatchObject({ valid: true, plan: 'pro', expiresAt: null, activationsUsed: 1, activationLimit: 3, offline: false })
  expect(b.valid).toBe(true)
  expect(fake.requests[0].body).toEqual({ key: KEY, device_fingerprint: FP, app_version: '3.2.1', device_name: "Alice's laptop", product_id: 'prod_X' })
  expect(fake.requests[0].nonce).toMatch(/^[A-Za-z0-9_-]{16,128}$/)
  expect(fake.requests[0].nonce).not.toBe(fake.requests[1].nonce)
  expect(fake.requests[0].auth).toBe('Bearer kw_test')
})

test('the SPKI PEM public key works as well as the raw one', async () => {
  expect((await client({ publicKey: fake.publicKeyPem }).validate({ key: KEY })).valid).toBe(true)
})

test('forged, unsigned or other-request answers are errors, never a valid result', async () => {
  for (const mode of ['wrong_key', 'changed_body', 'wrong_nonce', 'wrong_path', 'unsigned'] as const) {
    fake.mode = mode
    const err = await rejection(client().validate({ key: KEY }))
    expect({ mode, error: err instanceof SignatureError, code: err.code }).toEqual({ mode, error: true, code: 'bad_signature' })
  }
})

test('a forged refusal does not clear the stored answer: it counts as no answer, the stored one stands in', async () => {
  const kw = client()
  await kw.validate({ key: KEY })
  fake.validateAnswer = { valid: false, reason: 'revoked' }
  fake.mode = 'wrong_key'
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
  fake.mode = 'down'
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })
})

test('refusals are verified answers, not errors', async () => {
  for (const reason of ['not_found', 'revoked', 'expired', 'activation_limit']) {
    fake.validateAnswer = { valid: false, reason }
    expect(await client().validate({ key: KEY })).toMatchObject({ valid: false, reason, offline: false })
  }
})

test('grace: while the service answers 503/500 or is gone, the stored answer stands in, marked offline', async () => {
  const kw = client()
  await kw.validate({ key: KEY })
  for (const mode of ['down', 'error500'] as const) {
    fake.mode = mode
    expect(await kw.validate()).toMatchObject({ valid: true, plan: 'pro', offline: true })
  }
  const gone = client({ baseUrl: 'http://127.0.0.1:9', storage: (kw as any).storage, retries: 1 })
  expect(await gone.validate({ key: KEY })).toMatchObject({ valid: true, offline: true })
})

test('grace ends after graceSeconds', async () => {
  let now = Date.now()
  const kw = client({ now: () => now, graceSeconds: 3600 })
  await kw.validate({ key: KEY })
  fake.mode = 'down'
  now += 3500_000
  expect((await kw.validate()).offline).toBe(true)
  now += 200_000
  const err = await rejection(kw.validate())
  expect(err).toBeInstanceOf(UnreachableError)
  expect(err.status).toBe(503)
})

test('grace is refused once the clock went back more than 5 minutes since the last call', async () => {
  let now = Date.now()
  const kw = client({ now: () => now })
  await kw.validate({ key: KEY })
  now += 60_000
  fake.mode = 'down'
  expect((await kw.validate()).offline).toBe(true)
  now -= 7 * 60_000 // the user sets the clock back
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
})

test('a definitive refusal forgets the stored answer: no grace afterwards', async () => {
  for (const reason of ['revoked', 'expired', 'not_found', 'activation_limit']) {
    const kw = client()
    fake.mode = 'ok'
    fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
    await kw.validate({ key: KEY })
    fake.validateAnswer = { valid: false, reason }
    expect((await kw.validate()).valid).toBe(false)
    fake.mode = 'down'
    expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
  }
})

test('a refusal of another key leaves this key\'s stored answer (a mistyped key does not end grace)', async () => {
  const kw = client()
  await kw.validate({ key: KEY })
  fake.validateAnswer = { valid: false, reason: 'not_found' }
  expect(await kw.validate({ key: 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012' })).toMatchObject({ valid: false, reason: 'not_found' })
  fake.mode = 'down'
  expect(await kw.validate({ key: KEY })).toMatchObject({ valid: true, offline: true })
})

test('a stored answer is re-verified when read: a tampered one, or one for another key or device, gives no grace', async () => {
  const storage = memoryStorage()
  const kw = client({ storage })
  await kw.validate({ key: KEY })
  const stored = JSON.parse((await storage.get(graceSlot(KEY)))!)
  fake.mode = 'down'
  await storage.set(graceSlot(KEY), JSON.stringify({ ...stored, body: stored.body.replace('"pro"', '"ultimate"') }))
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
  await storage.set(graceSlot(KEY), JSON.stringify(stored))
  expect((await kw.validate()).offline).toBe(true)
  expect(await rejection(kw.validate({ key: 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012' }))).toBeInstanceOf(UnreachableError)
  const otherDevice = client({ storage, fingerprint: 'b'.repeat(64) })
  expect(await rejection(otherDevice.validate({ key: KEY }))).toBeInstanceOf(UnreachableError)
})

test('fileStorage keeps grace across restarts of the app', async () => {
  const path = join(dir, 'sub', 'license.json')
  await client({ storage: fileStorage(path) }).validate({ key: KEY })
  fake.mode = 'down'
  expect(await client({ storage: fileStorage(path) }).validate({ key: KEY })).toMatchObject({ valid: true, offline: true })
})

test('retries: 503 and network errors are retried with a fresh nonce each time', async () => {
  fake.script = ['down', 'down']
  expect((await client({ retries: 3 }).validate({ key: KEY })).valid).toBe(true)
  expect(fake.requests.length).toBe(3)
  expect(new Set(fake.requests.map((r) => r.nonce)).size).toBe(3)

  let calls = 0
  const flaky: typeof fetch = (async (input: any, init: any) => {
    if (++calls < 3) throw new TypeError('fetch failed')
    return fetch(input, init)
  }) as typeof fetch
  expect((await client({ fetch: flaky, retries: 2 }).validate({ key: KEY })).valid).toBe(true)
  expect(calls).toBe(3)
})

test('retries give up after `retries` extra attempts: unreachable (no grace stored)', async () => {
  fake.mode = 'down'
  const err = await rejection(client({ retries: 2 }).validate({ key: KEY }))
  expect(err).toBeInstanceOf(UnreachableError)
  expect(err.code).toBe('unreachable')
  expect(fake.requests.length).toBe(3)
})

test('a 500 is not retried (a bug, not an outage)', async () => {
  fake.mode = 'error500'
  expect(await rejection(client({ retries: 3 }).validate({ key: KEY }))).toBeInstanceOf(UnreachableError)
  expect(fake.requests.length).toBe(1)
})

test('429 is a typed, signed rate-limited error by default; with waitOnRateLimit it waits retry_after and retries', async () => {
  fake.mode = 'rate_limited'
  fake.retryAfter = 1
  const err = await rejection(client().validate({ key: KEY }))
  expect(err).toBeInstanceOf(RateLimitedError)
  expect(err).toMatchObject({ code: 'rate_limited', status: 429, retryAfter: 1, signed: true })
  expect(err.requestId).toStartWith('req_fake')
  expect(fake.requests.length).toBe(1)

  fake.mode = 'ok'
  fake.script = ['rate_limited']
  fake.requests = []
  expect((await client({ waitOnRateLimit: true }).validate({ key: KEY })).valid).toBe(true)
  expect(fake.requests.length).toBe(2)

  fake.script = ['rate_limited']
  fake.retryAfter = 3600
  expect(await rejection(client({ waitOnRateLimit: 60 }).validate({ key: KEY }))).toBeInstanceOf(RateLimitedError)
})

test('a forged error answer (bad signature on a 429) is a signature error', async () => {
  fake.mode = 'rate_limited'
  const kw = new Keyward({ baseUrl: fake.url, token: 'kw_test', publicKey: otherKey(), fingerprint: FP, storage: memoryStorage() })
  expect((await rejection(kw.validate({ key: KEY }))).code).toBe('bad_signature')
})

function otherKey() {
  return rawKey(generateKeyPairSync('ed25519').publicKey)
}

test('an unsigned 401 is `unauthorized` from its status alone (the body is not believed), marked unsigned', async () => {
  const err = await rejection(client({ token: 'kw_wrong' }).validate({ key: KEY }))
  expect(err).toBeInstanceOf(KeywardError)
  expect(err).toMatchObject({ code: 'unauthorized', status: 401, signed: false })
  expect(err.detail).not.toContain('fake')
  expect(err.requestId).toStartWith('req_fake')
})

test('every call has a timeout: a server that never answers is unreachable after timeoutMs', async () => {
  const hanging: typeof fetch = ((_: any, init: any) =>
    new Promise((_resolve, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason)))) as typeof fetch
  const err = await rejection(client({ fetch: hanging, timeoutMs: 50, retries: 1 }).validate({ key: KEY }))
  expect(err).toBeInstanceOf(UnreachableError)
  expect(err.detail).toContain('timed out after 50 ms')
})

test('devices and deactivate: the self-service screen, both verified; signing out this device ends its grace', async () => {
  const storage = memoryStorage()
  const me = client({ storage })
  await client({ fingerprint: 'b'.repeat(64) }).validate({ key: KEY, deviceName: 'old laptop' })
  await me.validate({ key: KEY, deviceName: 'new laptop' })
  const list = await me.devices()
  expect(list).toMatchObject({ status: 'active', activationLimit: 3, activationsUsed: 2 })
  expect(list.devices.map((d) => [d.name, d.current])).toEqual([['old laptop', false], ['new laptop', true]])
  expect(await me.deactivate('b'.repeat(64))).toEqual({ deactivated: true, activationsUsed: 1, activationLimit: 3 })
  expect(await storage.get(graceSlot(KEY))).not.toBeNull()
  expect((await me.deactivate()).deactivated).toBe(true)
  expect(await storage.get(graceSlot(KEY))).toBeNull()
  fake.mode = 'wrong_key'
  expect((await rejection(me.devices())).code).toBe('bad_signature')
  expect((await rejection(client().devices())).code).toBe('no_key')
})

test('heartbeat: validates on its interval, one call at a time, reports a lost seat once and stops', async () => {
  let concurrent = 0
  let maxConcurrent = 0
  const slow: typeof fetch = (async (input: any, init: any) => {
    maxConcurrent = Math.max(maxConcurrent, ++concurrent)
    try {
      await Bun.sleep(30) // slower than the interval: beats must still not overlap
      return await fetch(input, init)
    } finally {
      concurrent--
    }
  }) as typeof fetch
  const kw = client({ fetch: slow })
  await kw.validate({ key: KEY })
  const lost: unknown[] = []
  let beats = 0
  const { promise, resolve } = Promise.withResolvers<void>()
  const hb = kw.heartbeat({
    intervalSeconds: 0.01,
    onValid: () => {
      if (++beats === 3) fake.validateAnswer = { valid: false, reason: 'revoked' }
    },
    onLost: (why) => {
      lost.push(why)
      resolve()
    },
  })
  await promise
  expect(lost).toEqual([{ reason: 'revoked' }])
  expect(hb.running).toBe(false)
  expect(maxConcurrent).toBe(1)
  const count = fake.requests.length
  await hb.stop()
  await Bun.sleep(100)
  expect(fake.requests.length).toBe(count)
})

test('heartbeat.stop() ends it: no call after stop resolves', async () => {
  const kw = client()
  await kw.validate({ key: KEY })
  let beats = 0
  const { promise, resolve } = Promise.withResolvers<void>()
  const hb = kw.heartbeat({ intervalSeconds: 0.01, onLost: () => {}, onValid: () => ++beats === 2 && resolve() })
  await promise
  await hb.stop()
  const count = fake.requests.length
  await Bun.sleep(100)
  expect(fake.requests.length).toBe(count)
  expect(hb.running).toBe(false)
})

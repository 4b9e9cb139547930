// The client against a real Keyward node that goes away and comes back: a TCP proxy between them
// (test/support/tcp-proxy.ts) refuses connections or swallows them, so grace, timeouts and retries meet real
// sockets; the node's own refusals (revoked, expired, activation_limit) and a deactivation of this
// device end grace; and the heartbeat holds a floating seat (release_after_seconds) while a device that
// stopped beating is released by the node's inactivity job, then reports the seat lost.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint as randomFingerprint, newKey, useHarness } from '../support/harness'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { events, until } from '../validation/support'
import { Keyward, memoryStorage, UnreachableError, type FetchLike, type KeywardError, type KeywardOptions, type ValidateResult } from '../../client/src/index.ts'
import { graceSlot } from '../../client/test/support/grace-slot'
import { rejection } from '../../client/test/support/rejection'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let publicKey: string
let proxy: TcpProxy
beforeAll(async () => {
  const vendor = await vendorOn(h)
  ;({ token, validateToken, productId } = vendor)
  publicKey = vendor.publicKey.raw
  const node = new URL(h.node.url)
  proxy = await startTcpProxy(node.hostname, Number(node.port))
})
afterAll(() => proxy?.close())
beforeEach(() => proxy?.restore())

/** A client that reaches the node through the proxy. */
const sdk = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: proxy.url('http'), token: validateToken, publicKey, productId, storage: memoryStorage(), retries: 0, backoffMs: 1, ...opts })

const key = (extra: Record<string, unknown> = {}) => newKey(h.call, token, productId, { plan: 'pro', ...extra }) as Promise<{ id: string; key_value: string }>
/** A key's stored grace answer in a client's storage (null when none). */
const storedAnswer = (kw: Keyward, keyValue: string) => kw.storage.get(graceSlot(keyValue, productId))
const activations = async (keyId: string) => (await h.call('GET', `/v1/keys/${keyId}`, { token })).body.activations as any[]

test('grace: the node refuses connections or never answers: the stored answer stands in, offline; refused after a clock set back and after graceSeconds', async () => {
  const k = await key()
  let offset = 0
  let attempts = 0
  const counting: FetchLike = (input, init) => (attempts++, fetch(input, init))
  const kw = sdk({ now: () => Date.now() + offset, graceSeconds: 3600, retries: 1, timeoutMs: 400, fetch: counting })
  const online = await kw.validate({ key: k.key_value })
  expect(online).toMatchObject({ valid: true, plan: 'pro', offline: false })
  if (!online.valid) throw new Error('expected a valid answer')
  const offline = { ...online, offline: true }

  proxy.refuse() // the node is down: connection refused
  expect(await kw.validate()).toEqual(offline)

  proxy.restore()
  proxy.stall() // a black hole: connections are taken, nothing comes back; each attempt ends at timeoutMs
  const before = attempts
  expect(await kw.validate()).toEqual(offline)
  expect(attempts - before).toBe(2) // the first attempt and one retry, both timed out

  proxy.refuse()
  offset = 30 * 60_000 // half an hour later: still within grace
  expect(await kw.validate()).toEqual(offline)
  offset = 10 * 60_000 // the clock set back 20 minutes: grace refused
  const back = await rejection(kw.validate())
  expect(back).toBeInstanceOf(UnreachableError)
  expect(back.code).toBe('unreachable')
  offset = 31 * 60_000 // the clock right again (past the latest time seen): grace stands again
  expect(await kw.validate()).toEqual(offline)
  offset = 61 * 60_000 // past graceSeconds
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)

  // The node back: a fresh verified answer, not the stored one.
  proxy.restore()
  const fresh = sdk({ storage: kw.storage })
  const again = await fresh.validate({ key: k.key_value })
  expect(again).toMatchObject({ valid: true, offline: false })
  expect(again.signedAt.getTime()).toBeGreaterThan(online.signedAt.getTime())
})

test('retries: the node comes back while the client backs off: the retry gets a fresh verified answer, not grace', async () => {
  const k = await key()
  const storage = memoryStorage()
  expect((await sdk({ storage }).validate({ key: k.key_value })).valid).toBe(true)
  proxy.refuse()
  const sleeps: number[] = []
  let attempts = 0
  const kw = sdk({
    storage,
    retries: 5,
    backoffMs: 100,
    fetch: (input, init) => (attempts++, fetch(input, init)),
    sleep: async (ms) => {
      sleeps.push(ms)
      if (sleeps.length === 2) proxy.restore() // up again during the second backoff
      await Bun.sleep(ms)
    },
  })
  const result = await kw.validate({ key: k.key_value })
  expect(result).toMatchObject({ valid: true, offline: false })
  expect(attempts).toBe(3)
  // full jitter under a doubling ceiling
  expect(sleeps).toHaveLength(2)
  sleeps.forEach((ms, i) => expect(ms).toBeLessThanOrEqual(100 * 2 ** i))
})

test('the node\'s definitive refusals end grace: revoked, expired, activation_limit', async () => {
  const refusedThenNoGrace = async (kw: Keyward, keyValue: string, reason: string) => {
    expect(await kw.validate()).toMatchObject({ valid: false, reason, offline: false })
    expect(await storedAnswer(kw, keyValue)).toBeNull()
    proxy.refuse()
    expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
    proxy.restore()
  }

  const revoked = await key()
  const a = sdk({ key: revoked.key_value })
  expect((await a.validate()).valid).toBe(true)
  expect(await storedAnswer(a, revoked.key_value)).not.toBeNull()
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)
  await refusedThenNoGrace(a, revoked.key_value, 'revoked')

  const expiresAt = Date.now() + 1500
  const expiring = await key({ expires_at: new Date(expiresAt).toISOString() })
  const b = sdk({ key: expiring.key_value })
  expect((await b.validate()).valid).toBe(true)
  await Bun.sleep(Math.max(0, expiresAt - Date.now()) + 200)
  await refusedThenNoGrace(b, expiring.key_value, 'expired')

  // A seat removed by the vendor (admin) and taken by another device: this one is over the limit.
  const single = await key({ activation_limit: 1 })
  const c = sdk({ key: single.key_value, fingerprint: randomFingerprint() })
  expect((await c.validate()).valid).toBe(true)
  const [seat] = await activations(single.id)
  expect((await h.call('DELETE', `/v1/keys/${single.id}/activations/${seat.id}`, { token })).status).toBe(200)
  expect((await sdk({ fingerprint: randomFingerprint() }).validate({ key: single.key_value })).valid).toBe(true)
  await refusedThenNoGrace(c, single.key_value, 'activation_limit')
})

test('deactivating this device ends its grace; releasing another device does not', async () => {
  const k = await key({ activation_limit: 3 })
  const kw = sdk({ key: k.key_value })
  const other = randomFingerprint()
  expect((await kw.validate()).valid).toBe(true)
  expect((await sdk({ fingerprint: other }).validate({ key: k.key_value })).valid).toBe(true)

  expect(await kw.deactivate(other)).toMatchObject({ deactivated: true, activationsUsed: 1 })
  proxy.refuse()
  expect(await kw.validate()).toMatchObject({ valid: true, offline: true })

  proxy.restore()
  expect(await kw.deactivate()).toMatchObject({ deactivated: true, activationsUsed: 0 })
  expect(await storedAnswer(kw, k.key_value)).toBeNull()
  proxy.refuse()
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
  expect((await activations(k.id)).map((a) => [a.status, a.deactivation_reason])).toEqual([
    ['deactivated', 'user'],
    ['deactivated', 'user'],
  ])
})

test('heartbeat: a beating device keeps its floating seat past release_after_seconds, a stopped one is released (inactive); lost seats are reported', async () => {
  const k = await key({ activation_limit: 2, release_after_seconds: 60 })
  const direct = (fp: string) => sdk({ baseUrl: h.node.url, fingerprint: fp, key: k.key_value })
  const [fpA, fpB, fpC] = [randomFingerprint(), randomFingerprint(), randomFingerprint()]
  const A = direct(fpA)
  const B = direct(fpB)
  expect((await A.validate({ deviceName: 'A' })).valid).toBe(true)
  expect((await B.validate({ deviceName: 'B' })).valid).toBe(true)

  // Both seats taken 50 s ago (time moved in SQL, as the node's own inactivity tests do): 10 s short
  // of release. From now on only A sends heartbeats; the node's jobs run at their defaults (1 s).
  await h.node.deps.validation.flush()
  await h.node.deps.sql`update activations set activated_at = now() - interval '50 seconds', last_validated_at = now() - interval '50 seconds'
    where key_id = ${k.id} and status = 'active'`
  const shiftedAt = Date.now() - 50_000
  const beats: ValidateResult[] = []
  const lostA: unknown[] = []
  const hbA = A.heartbeat({ intervalSeconds: 0.5, onValid: (r) => void beats.push(r), onLost: (why) => void lostA.push(why) })

  const seats = await until(
    () => activations(k.id),
    (rows) => rows.some((a) => a.device_fingerprint === fpB && a.status === 'deactivated'),
    30_000,
  )
  const byDevice = Object.fromEntries(seats.map((a) => [a.device_fingerprint, a]))
  expect(byDevice[fpB]).toMatchObject({ status: 'deactivated', deactivation_reason: 'inactive', device_name: 'B' })
  expect(byDevice[fpA]).toMatchObject({ status: 'active', device_name: 'A' })
  expect(Date.parse(byDevice[fpA].last_validated_at)).toBeGreaterThan(shiftedAt + 5_000) // kept fresh by the beats
  const released = await events(h.node.deps.sql, 'activation.deactivated', k.id)
  expect(released.map((e) => [e.data.activation.device_fingerprint, e.data.activation.deactivation_reason])).toEqual([[fpB, 'inactive']])
  expect(lostA).toEqual([])
  expect(hbA.running).toBe(true)
  expect(beats.length).toBeGreaterThan(0)
  expect(beats.every((r) => r.valid && !r.offline && r.activationsUsed <= 2)).toBe(true)

  // The freed seat goes to C; B comes back and its heartbeat reports the seat lost (and forgets its grace).
  expect(await direct(fpC).validate()).toMatchObject({ valid: true, activationsUsed: 2 })
  const lostB: any[] = []
  const hbB = B.heartbeat({ intervalSeconds: 0.2, onLost: (why) => void lostB.push(why) })
  await until(async () => lostB.length, (n) => n > 0)
  expect(lostB).toEqual([{ reason: 'activation_limit' }])
  expect(hbB.running).toBe(false)
  expect(await storedAnswer(B, k.key_value)).toBeNull()

  // The vendor revokes the key: A's next beat reports it, once, and the heartbeat stops.
  expect((await h.call('POST', `/v1/keys/${k.id}/revoke`, { token, body: {} })).status).toBe(200)
  await until(async () => lostA.length, (n) => n > 0)
  expect(lostA).toEqual([{ reason: 'revoked' }])
  expect(hbA.running).toBe(false)
  const count = beats.length
  await Bun.sleep(1200)
  expect(beats.length).toBe(count)
  expect(lostA).toHaveLength(1)
  await Promise.all([hbA.stop(), hbB.stop()])
})

test('heartbeat while the node is away: beats are answered from grace (offline), and the seat is lost once grace is over', async () => {
  const k = await key()
  let offset = 0
  const kw = sdk({ key: k.key_value, graceSeconds: 3600, now: () => Date.now() + offset })
  expect((await kw.validate()).valid).toBe(true)
  proxy.refuse()
  const beats: ValidateResult[] = []
  const lost: { error?: KeywardError; reason?: string }[] = []
  const hb = kw.heartbeat({ intervalSeconds: 0.2, onValid: (r) => void beats.push(r), onLost: (why) => void lost.push(why) })
  await until(async () => beats.length, (n) => n >= 2)
  expect(beats.every((r) => r.valid && r.offline)).toBe(true)
  expect(lost).toEqual([])
  offset = 2 * 3600_000
  await until(async () => lost.length, (n) => n > 0)
  expect(lost).toHaveLength(1)
  expect(lost[0]!.error).toBeInstanceOf(UnreachableError)
  expect(hb.running).toBe(false)
  await hb.stop()
})

// The client against a real Keyward node (started by the test): validate's signed answers are verified
// (and checked here a second time with node:crypto: the signature covers the path, the nonce the client
// sent, the SHA-256 of the exact request body and the exact answer body, and `t` is the answer's
// signedAt), genuine answers tampered with on the way are refused, a proxy that swaps the key or the
// device in the request is caught, a clock that is off is its own error, the node's refusals come back typed, device_name and app_version reach the node, the
// self-service screen (devices, deactivate, 409 deactivation_limit) works, and the node's signed error
// answers (400, 403, 404, 409, 429) become typed errors marked `signed`, the 401 unsigned.
import { createHash, createPublicKey, verify } from 'node:crypto'
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { secondsToUtcMidnight } from '../../src/infra/counters'
import { ADMIN_TOKEN, fingerprint as randomFingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { ClockSkewError, Keyward, KeywardError, memoryStorage, RateLimitedError, SignatureError, type FetchLike, type KeywardOptions } from '../../client/src/index.ts'
import { graceSlot } from '../../client/test/support/grace-slot'
import { rejection } from '../../client/test/support/rejection'
import { data } from '../../client/test/support/data'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness() // a real socket: POST /v1/validate through the node's fast path

let token: string
let validateToken: string
let productId: string
let publicKey: { raw: string; pem: string; kid: string }
beforeAll(async () => {
  ;({ token, validateToken, productId, publicKey } = await vendorOn(h))
})

const sdk = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey: publicKey.raw, productId, storage: memoryStorage(), retries: 0, ...opts })

const key = (extra: Record<string, unknown> = {}) => newKey(h.call, token, productId, { plan: 'pro', ...extra }) as Promise<{ id: string; key_value: string }>
const keyDetail = async (id: string) => (await h.call('GET', `/v1/keys/${id}`, { token })).body

interface Exchange {
  path: string
  nonce: string
  request: any
  /** The request body exactly as sent. */
  requestText: string
  status: number
  signature: string | null
  bytes: Uint8Array<ArrayBuffer>
}

/** A fetch that passes everything through and keeps what went over the wire; `tamper` may change the answer. */
function recorder(tamper?: (x: Exchange, res: Response) => Response | Promise<Response>) {
  const seen: Exchange[] = []
  const fetchImpl: FetchLike = async (input, init) => {
    const res = await fetch(input, init)
    const bytes = new Uint8Array(await res.arrayBuffer())
    const x: Exchange = {
      path: new URL(input).pathname,
      nonce: new Headers(init.headers as HeadersInit).get('keyward-nonce') ?? '',
      request: JSON.parse(String(init.body)),
      requestText: String(init.body),
      status: res.status,
      signature: res.headers.get('keyward-signature'),
      bytes,
    }
    seen.push(x)
    const headers = new Headers(res.headers)
    headers.delete('content-length') // a tampered body may have another length
    const copy = new Response(bytes, { status: res.status, headers })
    return tamper ? tamper(x, copy) : copy
  }
  return { seen, fetch: fetchImpl }
}

/** What the client checks, done again independently: node:crypto and the published PEM. */
function checkedByNode(x: Exchange, path: string, pem = publicKey.pem) {
  const m = /^alg=ed25519, kid=([0-9a-f]+), t=(\d+), sig=([A-Za-z0-9+/]+=*)$/.exec(x.signature ?? '')
  if (!m) throw new Error(`not a Keyward-Signature: ${x.signature}`)
  const requestSha256 = createHash('sha256').update(x.requestText, 'utf8').digest('hex')
  const signed = Buffer.concat([Buffer.from(`keyward-answer/v3\n${m[1]}\n${path}\n${x.nonce}\n${m[2]}\n${requestSha256}\n`, 'utf8'), x.bytes])
  return { genuine: verify(null, signed, createPublicKey(pem), Buffer.from(m[3]!, 'base64')), kid: m[1], t: Number(m[2]) }
}

test('validate: a signed valid answer, verified (nonce, path, t), typed, stored for grace; device_name and app_version reach the node', async () => {
  const k = await key({ activation_limit: 3 })
  const storage = memoryStorage()
  const rec = recorder()
  const kw = sdk({ fetch: rec.fetch, storage })
  const before = Date.now()
  const first = await kw.validate({ key: k.key_value, deviceName: "Alice's laptop", appVersion: '3.2.1' })
  expect(data(first)).toEqual({ valid: true, plan: 'pro', expiresAt: null, activationsUsed: 1, activationLimit: 3, policyId: null, entitlements: {}, expired: false, graceUntil: null, creditsRemaining: null, offline: false, signedAt: expect.any(Date) })

  const [x] = rec.seen
  const fp = await kw.fingerprint()
  expect(x!.path).toBe('/v1/validate')
  expect(x!.request).toEqual({ key: k.key_value, device_fingerprint: fp, app_version: '3.2.1', device_name: "Alice's laptop", product_id: productId, components: await kw.components() })
  expect(x!.nonce).toMatch(/^[A-Za-z0-9_-]{16,128}$/)
  const check = checkedByNode(x!, '/v1/validate')
  expect(check).toEqual({ genuine: true, kid: publicKey.kid, t: first.signedAt.getTime() })
  expect(check.t).toBeGreaterThanOrEqual(before - 1000)
  expect(checkedByNode(x!, '/v1/devices').genuine).toBe(false) // the path is part of what is signed
  expect(checkedByNode({ ...x!, requestText: x!.requestText.replace(fp, randomFingerprint()) }, '/v1/validate').genuine).toBe(false) // and the request

  // The stored grace answer is the node's signed answer, byte for byte, with the request it answered.
  const stored = JSON.parse((await storage.get(graceSlot(k.key_value, productId)))!)
  expect(stored).toMatchObject({ path: '/v1/validate', nonce: x!.nonce, t: check.t, kid: publicKey.kid, request: x!.requestText, body: new TextDecoder().decode(x!.bytes) })

  // The node recorded the name and version on the activation.
  let activation = (await keyDetail(k.id)).activations[0]
  expect(activation).toMatchObject({ device_fingerprint: fp, device_name: "Alice's laptop", app_version: '3.2.1', status: 'active' })

  // A repeat validate sends a fresh nonce; a new name and version replace the stored ones.
  const again = await kw.validate({ deviceName: 'Alice (work)', appVersion: '3.3.0' })
  expect(again).toMatchObject({ valid: true, activationsUsed: 1, offline: false })
  expect(rec.seen[1]!.nonce).not.toBe(x!.nonce)
  expect(checkedByNode(rec.seen[1]!, '/v1/validate').genuine).toBe(true)
  await h.node.deps.validation.flush() // repeat validations reach Postgres in the node's batched write
  activation = (await keyDetail(k.id)).activations[0]
  expect(activation).toMatchObject({ device_name: 'Alice (work)', app_version: '3.3.0' })
  expect((await kw.devices()).devices[0]).toMatchObject({ fingerprint: fp, name: 'Alice (work)', appVersion: '3.3.0', current: true })

  // The PEM form of the published key verifies the same answers.
  expect((await sdk({ publicKey: publicKey.pem }).validate({ key: k.key_value })).valid).toBe(true)
})

test('validate: the node\'s refusals come back verified and typed (not_found, revoked, expired, activation_limit)', async () => {
  const fp = randomFingerprint()
  const rec = recorder()
  const kw = sdk({ fingerprint: fp, fetch: rec.fetch })
  const refused = async (keyValue: string, reason: string, client = kw) => {
    const n = rec.seen.length
    const r = await client.validate({ key: keyValue })
    expect(data(r)).toEqual({ valid: false, reason, offline: false, signedAt: expect.any(Date) })
    // The node answers a refusal with 200 and a signed body (it is an answer, not an error).
    const x = rec.seen[n]!
    expect([x.status, JSON.parse(new TextDecoder().decode(x.bytes))]).toEqual([200, { valid: false, reason }])
    expect(checkedByNode(x, '/v1/validate')).toMatchObject({ genuine: true, t: r.signedAt.getTime() })
  }

  // not_found: an unknown key, and a key of another product (productId guards against it)
  await refused('ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ', 'not_found')
  const otherProduct = (await newProduct(h.call, token)).id
  const foreign = (await newKey(h.call, token, otherProduct)) as { key_value: string }
  await refused(foreign.key_value, 'not_found')
  expect((await sdk({ productId: otherProduct, fingerprint: fp }).validate({ key: foreign.key_value })).valid).toBe(true)

  // revoked (a device that held a seat included)
  const revoked = await key()
  expect((await kw.validate({ key: revoked.key_value })).valid).toBe(true)
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)
  await refused(revoked.key_value, 'revoked')

  // expired: once expires_at has passed
  const expiresAt = new Date(Date.now() + 1500)
  const expiring = await key({ expires_at: expiresAt.toISOString() })
  const valid = await kw.validate({ key: expiring.key_value })
  expect(valid.valid && valid.expiresAt?.getTime()).toBe(expiresAt.getTime())
  await Bun.sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 200)
  await refused(expiring.key_value, 'expired')

  // activation_limit: a second device on a one-seat key
  const single = await key({ activation_limit: 1 })
  expect((await sdk({ fingerprint: randomFingerprint() }).validate({ key: single.key_value })).valid).toBe(true)
  await refused(single.key_value, 'activation_limit')
})

test('genuine node answers changed on the way, replayed, from another route or another account, unsigned or stale: SignatureError', async () => {
  const k = await key()
  const fp = randomFingerprint()
  expect((await sdk({ fingerprint: fp }).validate({ key: k.key_value })).valid).toBe(true)
  const revoked = await key()
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)

  const refused = async (name: string, client: Keyward, keyValue = k.key_value) => {
    const err = await rejection(client.validate({ key: keyValue }))
    expect({ name, type: err instanceof SignatureError, code: err.code }).toEqual({ name, type: true, code: 'bad_signature' })
  }

  // The crack: the node's signed "revoked" rewritten to valid.
  const cracked = recorder((_x, res) => {
    const body = JSON.stringify({ valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 99 })
    return new Response(body, { status: 200, headers: res.headers })
  })
  await refused('revoked rewritten to valid', sdk({ fingerprint: fp, fetch: cracked.fetch }), revoked.key_value)
  expect(cracked.seen[0]!.bytes.length).toBeGreaterThan(0)

  // A replay: the first genuine valid answer served again for every later request (its nonce is old).
  let captured: { bytes: Uint8Array<ArrayBuffer>; headers: Headers } | null = null
  const replaying = recorder((x, res) => {
    captured ??= { bytes: x.bytes, headers: res.headers }
    return new Response(captured.bytes, { status: 200, headers: captured.headers })
  })
  const storage = memoryStorage()
  const replayed = sdk({ fingerprint: fp, fetch: replaying.fetch, storage })
  expect((await replayed.validate({ key: k.key_value })).valid).toBe(true)
  // The replay is refused; where this device has a stored answer, it stands in (marked offline), as when
  // the service cannot be heard at all.
  expect(await replayed.validate({ key: k.key_value })).toMatchObject({ valid: true, offline: true })
  await refused('a replayed valid answer', sdk({ fingerprint: fp, fetch: replaying.fetch }))

  // The same nonce, answered by the node on another route (/v1/devices): the path is signed.
  const rerouted: FetchLike = (input, init) => fetch(input.replace('/v1/validate', '/v1/devices'), init)
  await refused('an answer signed for /v1/devices', sdk({ fingerprint: fp, fetch: rerouted }))

  // Another account's genuine Keyward (a pirate's own account): its signature is not this account's.
  const pirate = (await h.account()).token
  const pirateProduct = (await newProduct(h.call, pirate)).id
  const pirateKey = (await newKey(h.call, pirate, pirateProduct)) as { key_value: string }
  const pirateToken = await scopedToken(h.call, pirate, 'validate')
  await refused('another account', sdk({ token: pirateToken, productId: pirateProduct, fingerprint: fp }), pirateKey.key_value)

  // The signature header stripped.
  const stripped = recorder((_x, res) => {
    const headers = new Headers(res.headers)
    headers.delete('keyward-signature')
    return new Response(res.body, { status: res.status, headers })
  })
  await refused('unsigned', sdk({ fingerprint: fp, fetch: stripped.fetch }))

  // `t` more than 5 minutes from the local clock, either way: a genuine answer, a wrong clock (its own
  // error, clock_skew); within it is fine.
  for (const offset of [6 * 60_000, -6 * 60_000]) {
    const err = await rejection(sdk({ fingerprint: fp, now: () => Date.now() + offset }).validate({ key: k.key_value }))
    expect(err).toBeInstanceOf(ClockSkewError)
    expect(err.code).toBe('clock_skew')
  }
  expect((await sdk({ fingerprint: fp, now: () => Date.now() + 4 * 60_000 }).validate({ key: k.key_value })).valid).toBe(true)
})

test('a proxy that swaps in a bought key or another device (nonce forwarded) cannot make a revoked or made-up key valid', async () => {
  const bought = await key({ activation_limit: 1 })
  const boughtDevice = randomFingerprint()
  expect((await sdk({ fingerprint: boughtDevice }).validate({ key: bought.key_value })).valid).toBe(true)
  const revoked = await key()
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)
  /** The pirate's proxy: rewrites the request body's fields, keeps every header (the nonce too). */
  const swapping = (fields: Record<string, string>): FetchLike => (input, init) =>
    fetch(input, { ...init, body: JSON.stringify({ ...JSON.parse(String(init.body)), ...fields }) })
  const cases: { name: string; keyValue: string; fields: Record<string, string> }[] = [
    { name: 'revoked key, bought key and device swapped in', keyValue: revoked.key_value, fields: { key: bought.key_value, device_fingerprint: boughtDevice } },
    { name: 'made-up key, bought key swapped in', keyValue: 'ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ', fields: { key: bought.key_value, device_fingerprint: boughtDevice } },
    { name: 'bought key on a new device, the seated device swapped in', keyValue: bought.key_value, fields: { device_fingerprint: boughtDevice } },
  ]
  for (const c of cases) {
    const storage = memoryStorage()
    const err = await rejection(sdk({ fingerprint: randomFingerprint(), storage, fetch: swapping(c.fields) }).validate({ key: c.keyValue }))
    expect({ name: c.name, signatureError: err instanceof SignatureError, code: err.code }).toEqual({ name: c.name, signatureError: true, code: 'bad_signature' })
    expect(await storage.get(graceSlot(c.keyValue, productId))).toBeNull() // nothing stored for grace either
  }
  // The node saw only the bought key and device: still one seat.
  expect((await keyDetail(bought.id)).activations_used).toBe(1)
})

test('devices() and deactivate(): the self-service screen against the node, 409 deactivation_limit typed and signed', async () => {
  const k = await key({ activation_limit: 3, deactivations_allowed: 1 })
  const storage = memoryStorage()
  const mine = sdk({ storage })
  const laptop = sdk({ fingerprint: randomFingerprint() })
  await mine.validate({ key: k.key_value, deviceName: 'new desktop', appVersion: '2.0.0' })
  await laptop.validate({ key: k.key_value, deviceName: 'lost laptop' })

  const screen = await mine.devices()
  expect(screen).toMatchObject({ status: 'active', activationLimit: 3, activationsUsed: 2, deactivationsAllowed: 1, deactivationsUsed: 0 })
  expect(screen.devices.map((d) => [d.name, d.current])).toEqual([
    ['new desktop', true],
    ['lost laptop', false],
  ])
  // (bun's toMatchObject writes an asymmetric matcher into the object it checks: dates are checked apart)
  expect(screen.devices[0]).toMatchObject({ fingerprint: await mine.fingerprint(), appVersion: '2.0.0' })
  expect(screen.devices[0]!.activatedAt).toBeInstanceOf(Date)
  expect(screen.devices[0]!.activatedAt.getTime()).toBeGreaterThan(Date.now() - 60_000)

  // Release the lost laptop from the new machine.
  const lostFp = screen.devices[1]!.fingerprint
  expect(await mine.deactivate(lostFp)).toEqual({ deactivated: true, activationsUsed: 1, activationLimit: 3 })
  const detail = await keyDetail(k.id)
  expect(detail).toMatchObject({ activations_used: 1, deactivations_used: 1 })
  expect(detail.activations.find((a: any) => a.device_fingerprint === lostFp)).toMatchObject({ status: 'deactivated', deactivation_reason: 'user' })
  expect((await mine.devices()).devices.map((d) => d.name)).toEqual(['new desktop'])

  // The cap is reached: releasing this device is refused (signed 409), nothing is released, grace is kept.
  const rec = recorder()
  const capped = sdk({ storage, fetch: rec.fetch })
  const err = await rejection(capped.deactivate(undefined, { key: k.key_value }))
  expect(err).toBeInstanceOf(KeywardError)
  expect(err).toMatchObject({ code: 'deactivation_limit', status: 409, signed: true })
  expect(err.requestId).toMatch(/^req_/)
  expect(checkedByNode(rec.seen[0]!, '/v1/deactivate').genuine).toBe(true)
  expect((await mine.devices()).activationsUsed).toBe(1)
  expect(await storage.get(graceSlot(k.key_value, productId))).not.toBeNull()
  // A device that holds no seat: 200 deactivated:false, cap or not.
  expect(await mine.deactivate(randomFingerprint())).toMatchObject({ deactivated: false, activationsUsed: 1 })

  // A revoked key still lists its devices, with its status.
  expect((await h.call('POST', `/v1/keys/${k.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect(await mine.devices()).toMatchObject({ status: 'revoked', activationsUsed: 1 })
})

test('the node\'s error answers become typed errors, signed except the 401 (400, 401, 403, 404)', async () => {
  const k = await key()
  const rec = recorder()
  const kw = sdk({ fetch: rec.fetch })

  // 400: a device name with a control character (the node checks it; the client passes it on)
  const bad = await rejection(kw.validate({ key: k.key_value, deviceName: 'tab\there' }))
  expect(bad).toMatchObject({ code: 'invalid_request', status: 400, signed: true })
  expect(bad.detail.length).toBeGreaterThan(0)

  // 401: an unknown token; the node cannot sign for an unknown caller
  const unauthorized = await rejection(sdk({ token: 'kw_' + 'A'.repeat(32) }).validate({ key: k.key_value }))
  expect(unauthorized).toMatchObject({ code: 'unauthorized', status: 401, signed: false })

  // 403 on each of the three signed routes: a token of another scope
  const reader = sdk({ token: await scopedToken(h.call, token, 'keys:read'), fetch: rec.fetch })
  for (const call of [() => reader.validate({ key: k.key_value }), () => reader.devices({ key: k.key_value }), () => reader.deactivate(undefined, { key: k.key_value })]) {
    const err = await rejection(call())
    expect(err).toMatchObject({ code: 'insufficient_scope', status: 403, signed: true })
  }

  // 404: devices of an unknown key, or of a key of another product
  for (const keyValue of ['ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ', ((await newKey(h.call, token, (await newProduct(h.call, token)).id)) as { key_value: string }).key_value]) {
    const err = await rejection(kw.devices({ key: keyValue }))
    expect(err).toMatchObject({ code: 'not_found', status: 404, signed: true })
    expect(err.requestId).toMatch(/^req_/)
  }
  // Every signed error answer the node gave was genuine for its route and nonce.
  const signedErrors = rec.seen.filter((x) => x.status >= 400)
  expect(signedErrors.map((x) => x.status)).toEqual([400, 403, 403, 403, 404, 404])
  for (const x of signedErrors) expect(checkedByNode(x, x.path).genuine).toBe(true)
})

test('429 from the node: a signed RateLimitedError with the node\'s retry_after; waitOnRateLimit waits it out when allowed', async () => {
  // retry_after counts to the next UTC midnight: keep clear of the last seconds of a day
  if (secondsToUtcMidnight() < 10) await Bun.sleep(11_000)
  const free = await h.account('free')
  const freeValidate = await scopedToken(h.call, free.token, 'validate')
  const freeProduct = (await newProduct(h.call, free.token)).id
  const freeKey = ((await newKey(h.call, free.token, freeProduct)) as { key_value: string }).key_value
  const published = (await h.call('GET', '/v1/offline/public-key', { token: freeValidate })).body
  const freePublicKey = published.public_key
  const waits: number[] = []
  const rec = recorder()
  const make = (opts: Partial<KeywardOptions>) =>
    sdk({ token: freeValidate, publicKey: freePublicKey, productId: freeProduct, fetch: rec.fetch, sleep: async (ms) => void waits.push(ms), ...opts })

  const kw = make({})
  expect((await kw.validate({ key: freeKey })).valid).toBe(true)
  // The rest of the Free plan's 500 calls of the day, taken from the node's own counter.
  for (let i = 1; i < 500; i++) expect(await h.node.deps.counters.take(free.id, 500)).toBe(true)

  const limited = await rejection(kw.validate())
  expect(limited).toBeInstanceOf(RateLimitedError)
  expect(limited).toMatchObject({ code: 'rate_limited', status: 429, signed: true })
  expect(limited.retryAfter).toBeGreaterThan(0)
  expect(limited.retryAfter).toBeLessThanOrEqual(86_400)
  expect(Math.abs(limited.retryAfter - secondsToUtcMidnight())).toBeLessThanOrEqual(2)
  expect(checkedByNode(rec.seen.at(-1)!, '/v1/validate', published.public_key_pem).genuine).toBe(true)

  // Allowed to wait at most 5 s: the node asks for hours, so the error comes at once, nothing waited.
  const err = await rejection(make({ waitOnRateLimit: 5 }).validate({ key: freeKey }))
  expect(err).toBeInstanceOf(RateLimitedError)
  expect(waits).toEqual([])

  // Allowed to wait: the client sleeps the node's retry_after (the operator upgrades the plan
  // meanwhile, standing in for the day's end), then asks again and gets a fresh valid answer.
  const attempts = rec.seen.length
  const patient = make({
    waitOnRateLimit: true,
    sleep: async (ms) => {
      waits.push(ms)
      const res = await h.call('PATCH', `/admin/accounts/${free.id}`, { token: ADMIN_TOKEN, body: { plan: 'hobby' } })
      expect(res.status).toBe(200)
    },
  })
  expect(await patient.validate({ key: freeKey })).toMatchObject({ valid: true, offline: false })
  expect(waits).toHaveLength(1)
  expect(Math.abs(waits[0]! / 1000 - limited.retryAfter)).toBeLessThanOrEqual(2)
  expect(rec.seen.slice(attempts).map((x) => x.status)).toEqual([429, 200])
})

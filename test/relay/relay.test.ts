// The relay mode end to end as its operator runs it: `keyward relay request | load | serve` as
// subprocesses on a data folder, with licenses signed per the contract by a test account
// (test/support/relay.ts), answers verified with node:crypto only (leaf relay certificate → signer →
// root), kill -9 and restart, and check-in against a stand-in upstream that checks the signature.
import { afterAll, describe, expect, test } from 'bun:test'
import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto'
import { rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { decodeRequest, issueRelayLicense, KEY_VALUE, relayCli, startRelay, tempDir, testAccount, writeTemp, type RunningRelay } from '../support/relay'

const dirs: string[] = []
const running: RunningRelay[] = []
afterAll(async () => {
  for (const r of running) await r.stop('SIGKILL').catch(() => {})
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
const newDir = () => {
  const d = tempDir('relay-test-')
  dirs.push(d)
  return d
}
const FP = (n: number) => createHash('sha256').update(`device-${n}`).digest('hex')

async function call(relay: RunningRelay, path: string, body: unknown, nonce?: string) {
  const sent = typeof body === 'string' ? body : JSON.stringify(body)
  const res = await fetch(relay.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(nonce ? { 'keyward-nonce': nonce } : {}) }, body: sent })
  const bytes = new Uint8Array(await res.arrayBuffer())
  return { status: res.status, headers: res.headers, bytes, sent, json: JSON.parse(new TextDecoder().decode(bytes)) }
}

const keyOfRaw = (b64: string): KeyObject => createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(b64, 'base64').toString('base64url') }, format: 'jwk' })
const certPayload = (c: string) => JSON.parse(Buffer.from(c.split('.')[1]!, 'base64url').toString('utf8'))
const certVerifies = (key: KeyObject, c: string) => {
  const [a, b, s] = c.split('.')
  return verify(null, Buffer.from(`${a}.${b}`, 'ascii'), key, Buffer.from(s!, 'base64url'))
}

/** What an app holding only the root checks: the chain (relay certificate, then the signer's), then the v3 signature. */
function verifiedByChain(root: KeyObject, r: Awaited<ReturnType<typeof call>>, path: string, nonce: string): { relayId: string; scope: any } | null {
  const header = Object.fromEntries((r.headers.get('keyward-signature') ?? '').split(', ').map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]))
  const chain = (r.headers.get('keyward-certificate') ?? '').split(' ')
  if (!header.kid || chain.length < 1 || chain.length > 2) return null
  let signer = root
  if (chain.length === 2) {
    if (!certVerifies(root, chain[1]!)) return null
    signer = keyOfRaw(certPayload(chain[1]!).public_key)
  }
  if (!certVerifies(signer, chain[0]!)) return null
  const leaf = certPayload(chain[0]!)
  if (leaf.kid !== header.kid || leaf.scope.relay_id !== header.kid) return null
  const digest = createHash('sha256').update(r.sent).digest('hex')
  const message = Buffer.concat([Buffer.from(`keyward-answer/v3\n${header.kid}\n${path}\n${nonce}\n${header.t}\n${digest}\n`, 'utf8'), r.bytes])
  return verify(null, message, keyOfRaw(leaf.public_key), Buffer.from(header.sig, 'base64')) ? { relayId: leaf.kid, scope: leaf.scope } : null
}

describe('relay request and load', () => {
  test('request prints only the code; the key pair is made once, mode 0600, and reused', async () => {
    const data = newDir()
    const a = await relayCli(['request', '--data', data, '--name', 'Lab 4'])
    expect(a.code).toBe(0)
    expect(a.stdout.trim()).toMatch(/^KWRLY1\.[A-Za-z0-9_-]+$/)
    expect(a.stdout.trim().split('\n')).toHaveLength(1)
    const req = decodeRequest(a.stdout)
    expect(req.v).toBe(1)
    expect(Buffer.from(req.relay_public_key, 'base64url')).toHaveLength(32)
    expect(req.device_fingerprint).toMatch(/^[0-9a-f]{64}$/)
    expect(req.name).toBe('Lab 4')
    expect(Object.keys(req.components).length).toBeGreaterThan(0)
    expect(statSync(join(data, 'relay.key')).mode & 0o777).toBe(0o600)
    const b = await relayCli(['request', '--data', data])
    expect(decodeRequest(b.stdout).relay_public_key).toBe(req.relay_public_key)
    expect(decodeRequest(b.stdout).name).toBe('Lab 4')
  })

  test('load refuses a license for another key pair, another machine, another root, or expired; accepts its own', async () => {
    const account = testAccount()
    const data = newDir()
    const env = { KEYWARD_MACHINE_ID: 'machine-a' }
    const code = (await relayCli(['request', '--data', data], env)).stdout.trim()
    const otherRelay = (await relayCli(['request', '--data', newDir()], env)).stdout.trim()
    const otherMachine = (await relayCli(['request', '--data', data], { KEYWARD_MACHINE_ID: 'machine-b' })).stdout.trim()
    const root = account.root.publicKeyB64
    const load = (text: string, extra: string[] = ['--root', root]) => relayCli(['load', writeTemp(data, `l${Math.random()}.lic`, text), '--data', data, '--key', KEY_VALUE, ...extra], env)

    let r = await load(issueRelayLicense(account, otherRelay).file)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain("another relay's key pair")
    r = await load(issueRelayLicense(account, otherMachine).file)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('another machine')
    r = await load(issueRelayLicense(testAccount(), code).file)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('not signed by the pinned root')
    r = await load(issueRelayLicense(account, code, { expiresAt: new Date(Date.now() - 1000).toISOString() }).file)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('expired')
    r = await load('not a license')
    expect(r.code).not.toBe(0)
    // a relay certificate for another key than the license's
    const forged = issueRelayLicense(account, code, { certificateIn: 'beside' })
    const other = issueRelayLicense(account, code, { keyId: 'key_01JOTHERKEY0000000000000000', relayId: forged.relayId })
    r = await load(JSON.stringify({ relay_license: forged.text, relay_certificate: other.relayCertificate }))
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain("relay's certificate")

    r = await load(issueRelayLicense(account, code, { seats: 3 }).file)
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('3 seats')
    // the root is pinned: a later load with another root is refused
    r = await load(issueRelayLicense(account, code).file, ['--root', testAccount().root.publicKeyB64])
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('pinned')
  })
})

describe('relay serve', async () => {
  const account = testAccount()
  const signer = account.signingKey()
  const data = newDir()
  const env = { KEYWARD_MACHINE_ID: 'machine-serve' }
  const code = (await relayCli(['request', '--data', data], env)).stdout.trim()
  const license = issueRelayLicense(account, code, { signer, seats: 2, leaseSeconds: 900, keyExpiresAt: '2031-01-01T00:00:00.000Z', certificateIn: 'beside' })
  const loaded = await relayCli(['load', writeTemp(data, 'relay.json', license.file), '--data', data, '--key', KEY_VALUE.toLowerCase(), '--root', account.root.publicKeyB64], env)
  expect(loaded.code).toBe(0)
  let relay = await startRelay(data, env)
  running.push(relay)

  test('first start prints the admin token; validate leases seats; answers signed through the chain', async () => {
    expect(relay.adminToken).toMatch(/^[A-Za-z0-9_-]{20,}$/)
    const nonce = 'nonce-0123456789abcdef'
    const a = await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1), device_name: 'Bench 1' }, nonce)
    expect(a.status).toBe(200)
    expect(a.json).toMatchObject({ valid: true, activations_used: 1, activation_limit: 2, expires_at: '2031-01-01T00:00:00.000Z', plan: 'team', entitlements: { cad: true, seats_max: 10 }, expired: false, credits_remaining: null })
    expect(Date.parse(a.json.lease_expires_at)).toBeGreaterThan(Date.now() + 890_000)
    const verified = verifiedByChain(account.root.publicKey, a, '/v1/validate', nonce)
    expect(verified?.relayId).toBe(license.relayId)
    expect(a.headers.get('keyward-certificate')!.split(' ')[1]).toBe(signer.certificate!)
    // the same device renews; a second takes the second seat; a third is refused
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1) })).json.activations_used).toBe(1)
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(2), device_name: 'Bench 2' })).json).toMatchObject({ valid: true, activations_used: 2 })
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(3) })).json).toEqual({ valid: false, reason: 'activation_limit' })
    // refusals as Keyward's
    expect((await call(relay, '/v1/validate', { key: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE', device_fingerprint: FP(4) })).json).toEqual({ valid: false, reason: 'not_found' })
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1), product_id: 'prod_other' })).json).toEqual({ valid: false, reason: 'not_found' })
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1), require_entitlements: ['cad', 'cam'] })).json).toEqual({ valid: false, reason: 'entitlements_missing', missing: ['cam'] })
    const refusal = await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(3) }, nonce)
    expect(verifiedByChain(account.root.publicKey, refusal, '/v1/validate', nonce)).not.toBeNull()
  })

  test('bad input is a 400 naming the field, signed when a nonce was sent; nothing changes', async () => {
    const nonce = 'nonce-bad-0123456789ab'
    const r = await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: 'xyz' }, nonce)
    expect(r.status).toBe(400)
    expect(r.json.code).toBe('invalid_request')
    expect(r.json.errors[0].field).toContain('device_fingerprint')
    expect(verifiedByChain(account.root.publicKey, r, '/v1/validate', nonce)).not.toBeNull()
    expect((await call(relay, '/v1/validate', '{"key":')).status).toBe(400)
    expect((await call(relay, '/v1/validate', '[]')).status).toBe(400)
    const badNonce = await fetch(relay.url + '/v1/validate', { method: 'POST', headers: { 'keyward-nonce': 'short' }, body: '{}' })
    expect(badNonce.status).toBe(400)
    expect((await fetch(relay.url + '/nope')).status).toBe(404)
    const big = await fetch(relay.url + '/v1/validate', { method: 'POST', headers: { 'keyward-nonce': nonce }, body: JSON.stringify({ key: 'x'.repeat(70_000) }) })
    expect(big.status).toBe(413)
    expect(big.headers.get('keyward-signature')).toBeNull()
    const pre = await fetch(relay.url + '/v1/validate', { method: 'OPTIONS' })
    expect(pre.status).toBe(204)
    expect(pre.headers.get('access-control-allow-origin')).toBe('*')
    const devices = await call(relay, '/v1/devices', { key: KEY_VALUE })
    expect(devices.json.activations_used).toBe(2)
  })

  test('devices lists the leases; deactivate frees a seat at once', async () => {
    const d = await call(relay, '/v1/devices', { key: KEY_VALUE }, 'nonce-devices-0123456')
    expect(d.status).toBe(200)
    expect(d.json).toMatchObject({ status: 'active', activation_limit: 2, activations_used: 2 })
    expect(d.json.devices.map((x: any) => x.device_name)).toEqual(['Bench 1', 'Bench 2'])
    expect((await call(relay, '/v1/devices', { key: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE' })).status).toBe(404)
    const off = await call(relay, '/v1/deactivate', { key: KEY_VALUE, device_fingerprint: FP(2) })
    expect(off.json).toEqual({ deactivated: true, activations_used: 1, activation_limit: 2 })
    expect((await call(relay, '/v1/deactivate', { key: KEY_VALUE, device_fingerprint: FP(2) })).json.deactivated).toBe(false)
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(3), device_name: 'Bench 3' })).json).toMatchObject({ valid: true, activations_used: 2 })
  })

  test('kill -9 loses no lease: after a restart both seats are still held', async () => {
    await relay.stop('SIGKILL')
    relay = await startRelay(data, env)
    running.push(relay)
    expect(relay.adminToken).toBeNull() // printed on the first start only
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(5) })).json).toEqual({ valid: false, reason: 'activation_limit' })
    const d = await call(relay, '/v1/devices', { key: KEY_VALUE })
    expect(d.json.devices.map((x: any) => x.device_name)).toEqual(['Bench 1', 'Bench 3'])
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1) })).json).toMatchObject({ valid: true, activations_used: 2 })
  })

  test('one relay per data folder', async () => {
    const second = await relayCli(['serve', '--data', data, '--port', '0'], env)
    expect(second.code).toBe(2)
    expect(second.stderr).toContain('one relay per data folder')
  })

  test('the page and its calls take the admin token', async () => {
    const page = await fetch(relay.url + '/')
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('Keyward Relay')
    expect((await fetch(relay.url + '/relay/api/state')).status).toBe(401)
    expect((await fetch(relay.url + '/relay/api/state', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401)
    const first = running[0]!.adminToken!
    const state = await (await fetch(relay.url + '/relay/api/state', { headers: { authorization: `Bearer ${first}` } })).json()
    expect(state.license).toMatchObject({ relay_id: license.relayId, seats: 2, key_prefix: 'RE1AY' })
    expect(state.leases).toHaveLength(2)
    expect(state.request_code).toBe(code)
    const released = await fetch(relay.url + '/relay/api/release', { method: 'POST', headers: { authorization: `Bearer ${first}` }, body: JSON.stringify({ device_fingerprint: FP(3) }) })
    expect(await released.json()).toEqual({ released: true })
    expect((await call(relay, '/v1/devices', { key: KEY_VALUE })).json.activations_used).toBe(1)
  })
})

describe('lease expiry', async () => {
  const account = testAccount()
  const data = newDir()
  const env = { KEYWARD_MACHINE_ID: 'machine-expiry' }
  const code = (await relayCli(['request', '--data', data], env)).stdout.trim()
  await relayCli(['load', writeTemp(data, 'l.lic', issueRelayLicense(account, code, { seats: 1, leaseSeconds: 1 }).file), '--data', data, '--key', KEY_VALUE, '--root', account.root.publicKeyB64], env)

  test('an unrenewed lease frees its seat within lease_seconds + 5 s, across a kill -9 too', async () => {
    let relay = await startRelay(data, env)
    running.push(relay)
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1) })).json.valid).toBe(true)
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(2) })).json.reason).toBe('activation_limit')
    await relay.stop('SIGKILL')
    relay = await startRelay(data, env)
    running.push(relay)
    const started = Date.now()
    let answer: any
    do {
      await Bun.sleep(250)
      answer = (await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(2) })).json
    } while (!answer.valid && Date.now() - started < 8000)
    expect(answer).toMatchObject({ valid: true, activations_used: 1 })
  })
})

describe('expiry', () => {
  test("offline, the relay serves until its license expires, then answers expired; past the key's own expiry too", async () => {
    const account = testAccount()
    const data = newDir()
    const env = { KEYWARD_MACHINE_ID: 'machine-expires' }
    const code = (await relayCli(['request', '--data', data], env)).stdout.trim()
    const expiresAt = new Date(Date.now() + 4000).toISOString()
    const loaded = await relayCli(['load', writeTemp(data, 'l.lic', issueRelayLicense(account, code, { expiresAt }).file), '--data', data, '--key', KEY_VALUE, '--root', account.root.publicKeyB64], env)
    expect(loaded.code).toBe(0)
    const relay = await startRelay(data, env) // no UPSTREAM_URL: offline
    running.push(relay)
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1) })).json.valid).toBe(true)
    await Bun.sleep(Math.max(0, Date.parse(expiresAt) - Date.now() + 200))
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1) })).json).toEqual({ valid: false, reason: 'expired' })
    expect((await call(relay, '/v1/devices', { key: KEY_VALUE })).json.status).toBe('expired')

    // a key that expired before its relay license does
    const renewed = issueRelayLicense(account, code, { keyExpiresAt: new Date(Date.now() - 1000).toISOString() })
    const state = await fetch(relay.url + '/relay/api/license', { method: 'POST', headers: { authorization: `Bearer ${relay.adminToken}` }, body: JSON.stringify({ license: renewed.text }) })
    expect(state.status).toBe(200)
    expect((await call(relay, '/v1/validate', { key: KEY_VALUE, device_fingerprint: FP(1) })).json).toEqual({ valid: false, reason: 'expired' })
  })
})

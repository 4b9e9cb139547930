// Check-in against a stand-in upstream that checks what the contract says it checks: the body's
// shape and `Keyward-Relay-Signature` by the relay's key over "keyward-relay-checkin/v1\n" + t + "\n" +
// the body's SHA-256 (401 otherwise). It answers a status and, while valid, a renewed license; the relay
// (CHECK_IN_SECONDS=1) installs the renewal and stops answering valid within one check-in of a revoke,
// a suspension or a delete, and keeps serving while the upstream is unreachable.
import { afterAll, describe, expect, test } from 'bun:test'
import { createHash, createPublicKey, verify } from 'node:crypto'
import { rmSync } from 'node:fs'
import { decodeRequest, issueRelayLicense, KEY_VALUE, relayCli, startRelay, tempDir, testAccount, writeTemp, type RunningRelay } from '../support/relay'

const FP = (n: number) => createHash('sha256').update(`device-${n}`).digest('hex')
const account = testAccount()
const data = tempDir('relay-checkin-')
const env0 = { KEYWARD_MACHINE_ID: 'machine-checkin' }
const code = (await relayCli(['request', '--data', data], env0)).stdout.trim()
const req = decodeRequest(code)
const relayKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: req.relay_public_key }, format: 'jwk' })
const first = issueRelayLicense(account, code, { seats: 1 })

let answer: { status: number; body: unknown } = { status: 200, body: { status: 'valid' } }
const seen: { body: any; signed: boolean }[] = []
const upstream = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  async fetch(request) {
    const url = new URL(request.url)
    if (request.method !== 'POST' || url.pathname !== `/v1/relays/${first.relayId}/check-in`) return new Response('{}', { status: 404 })
    const bytes = new Uint8Array(await request.arrayBuffer())
    const header = request.headers.get('keyward-relay-signature') ?? ''
    const m = /^t=(\d+), sig=([A-Za-z0-9+/=]+)$/.exec(header)
    const digest = createHash('sha256').update(bytes).digest('hex')
    const signed = !!m && Math.abs(Date.now() - Number(m[1])) < 300_000 &&
      verify(null, Buffer.from(`keyward-relay-checkin/v1\n${m[1]}\n${digest}`, 'utf8'), relayKey, Buffer.from(m[2]!, 'base64'))
    const body = JSON.parse(new TextDecoder().decode(bytes))
    seen.push({ body, signed })
    if (!signed) return Response.json({ code: 'unauthorized' }, { status: 401 })
    return Response.json(answer.body, { status: answer.status })
  },
})

let relay: RunningRelay
afterAll(async () => {
  await relay?.stop('SIGKILL')
  upstream.stop(true)
  rmSync(data, { recursive: true, force: true })
})

const validate = async (n: number) =>
  (await (await fetch(relay.url + '/v1/validate', { method: 'POST', body: JSON.stringify({ key: KEY_VALUE, device_fingerprint: FP(n), device_name: `Station ${n}` }) })).json()) as any

/** Waits for the next check-ins to have been answered with the current answer. */
async function checkIns(n = 2) {
  const target = seen.length + n
  const deadline = Date.now() + 15_000
  while (seen.length < target && Date.now() < deadline) await Bun.sleep(100)
  expect(seen.length).toBeGreaterThanOrEqual(target)
}

describe('check-in', () => {
  test('signed reports, a renewed license installed, a revoke answered within one check-in', async () => {
    const loaded = await relayCli(['load', writeTemp(data, 'first.lic', first.file), '--data', data, '--key', KEY_VALUE, '--root', account.root.publicKeyB64], env0)
    expect(loaded.code).toBe(0)
    relay = await startRelay(data, { ...env0, UPSTREAM_URL: `http://127.0.0.1:${upstream.port}`, CHECK_IN_SECONDS: '1' })
    expect(await validate(1)).toMatchObject({ valid: true, activation_limit: 1 })
    await checkIns(1)
    const report = seen.at(-1)!
    expect(report.signed).toBe(true)
    expect(report.body).toMatchObject({ relay_id: first.relayId, license_id: `lic_${first.relayId.slice(4)}`, peak: 1 })
    expect(report.body.leases).toEqual([{ device_fingerprint: FP(1), device_name: 'Station 1', since: expect.any(String) }])
    expect(typeof report.body.t).toBe('number')

    // a renewal with more seats
    answer = { status: 200, body: { status: 'valid', license: issueRelayLicense(account, code, { relayId: first.relayId, seats: 3 }).text } }
    await checkIns()
    expect(await validate(2)).toMatchObject({ valid: true, activation_limit: 3, activations_used: 2 })

    // suspended upstream: the key's reason from the next check-in on; valid again after
    answer = { status: 200, body: { status: 'suspended' } }
    await checkIns()
    expect(await validate(1)).toEqual({ valid: false, reason: 'suspended' })
    answer = { status: 200, body: { status: 'valid' } }
    await checkIns()
    expect((await validate(1)).valid).toBe(true)

    // unreachable: serves on its license
    answer = { status: 503, body: { code: 'unavailable' } }
    await checkIns()
    expect((await validate(1)).valid).toBe(true)

    answer = { status: 200, body: { status: 'revoked' } }
    await checkIns()
    expect(await validate(1)).toEqual({ valid: false, reason: 'revoked' })
    expect(await validate(9)).toEqual({ valid: false, reason: 'revoked' })
    // reinstated and renewed upstream: valid again
    answer = { status: 200, body: { status: 'valid', license: issueRelayLicense(account, code, { relayId: first.relayId, seats: 3 }).text } }
    await checkIns()
    expect((await validate(1)).valid).toBe(true)
  })

  test('a relay the upstream deleted answers revoked', async () => {
    answer = { status: 404, body: { code: 'not_found' } } // a wrong URL changes nothing
    await checkIns()
    expect((await validate(1)).valid).toBe(true)
    answer = { status: 200, body: { status: 'deleted' } }
    await checkIns()
    expect(await validate(1)).toEqual({ valid: false, reason: 'revoked' })
    expect(seen.every((s) => s.signed)).toBe(true)
  })
})

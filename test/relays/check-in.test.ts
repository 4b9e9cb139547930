// A relay's check-in (docs/api.md, "Check-in"): signed by the relay key over the exact body bytes; a
// renewed license while the key is valid, the key's state otherwise; usage recorded for the console.
// Forged, stale, replayed-elsewhere and malformed check-ins are refused and change nothing.
import { beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPairSync } from 'node:crypto'
import { fingerprint, newKey, scopedToken, useHarness } from '../support/harness'
import { expectProblem, ghostId } from '../support/helpers'
import { offlineAccount } from '../support/offline'
import { rootKeyOf } from '../support/signing'
import { certificateOf, checkIn, checkInSignature, createRelay, envelopeOf, payloadOf, relayIdentity, requestCode, type RelayIdentity } from '../support/relays'

const h = useHarness()
let acct: { id: string; token: string }
let productId: string
beforeAll(async () => {
  ;({ acct, productId } = await offlineAccount(h))
}, 60_000)

async function licensed(extra: Record<string, unknown> = {}, seats = 2) {
  const key = await newKey(h.call, acct.token, productId, { activation_limit: 5, ...extra })
  const relay = relayIdentity()
  const res = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats })
  expect(res.status).toBe(201)
  const payload = payloadOf(res.body.relay_license)
  return { key, relay, relayId: res.body.relay_id as string, licenseId: payload.id as string, payload }
}

const state = async (relayId: string) =>
  (await h.node.deps.sql`select last_check_in_at, last_leases, issued_at, expires_at,
     (select count(*)::int from relay_usage u where u.relay_id = r.id) as days from relays r where id = ${relayId}`)[0]

const lease = (name: string | null = 'ws-1') => ({ device_fingerprint: fingerprint(), device_name: name, since: new Date().toISOString() })

describe('a genuine check-in', () => {
  test('valid: a renewed license (same id, new dates, new certificate); last check-in, leases and peak recorded', async () => {
    const { key, relay, relayId, licenseId, payload } = await licensed()
    await Bun.sleep(5)
    const res = await checkIn(h.call, relay, relayId, licenseId, { leases: [lease(), lease(null)], peak: 2 })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['license', 'status'])
    expect(res.body.status).toBe('valid')
    const renewed = payloadOf(res.body.license)
    expect(renewed).toMatchObject({ ...payload, issued_at: renewed.issued_at, expires_at: renewed.expires_at })
    expect(renewed.id).toBe(licenseId)
    expect(renewed.issued_at > payload.issued_at).toBe(true)
    const root = rootKeyOf((await h.call('GET', '/v1/offline/public-key', { token: acct.token })).body.public_key)
    const cert = certificateOf((envelopeOf(res.body.license) as any).relay_certificate, root)
    expect(cert.signed).toBe(true)
    expect(cert.payload.scope).toEqual({ relay_id: relayId, key_id: key.id, seats: 2, expires_at: renewed.expires_at })

    const listed = (await h.call('GET', `/v1/keys/${key.id}/relays`, { token: acct.token })).body.data[0]
    expect(listed.last_check_in_at).not.toBeNull()
    expect(listed).toMatchObject({ leases: 2, peak: 2, issued_at: renewed.issued_at, expires_at: renewed.expires_at })
    // a later check-in with a lower peak keeps the day's highest
    await checkIn(h.call, relay, relayId, licenseId, { leases: [], peak: 1 })
    const after = (await h.call('GET', `/v1/keys/${key.id}`, { token: acct.token })).body.relays[0]
    expect(after.peak).toBe(2)
    expect((await h.call('GET', `/v1/keys/${key.id}/relays`, { token: acct.token })).body.data[0].leases).toBe(0)
  })

  test("the key's state: revoked, suspended, expired, deleted; no license with them", async () => {
    const a = await licensed()
    await h.call('POST', `/v1/keys/${a.key.id}/suspend`, { token: acct.token, body: {} })
    expect((await checkIn(h.call, a.relay, a.relayId, a.licenseId)).body).toEqual({ status: 'suspended' })
    await h.call('POST', `/v1/keys/${a.key.id}/reinstate`, { token: acct.token })
    expect((await checkIn(h.call, a.relay, a.relayId, a.licenseId)).body.status).toBe('valid')
    await h.call('POST', `/v1/keys/${a.key.id}/revoke`, { token: acct.token, body: {} })
    expect((await checkIn(h.call, a.relay, a.relayId, a.licenseId)).body).toEqual({ status: 'revoked' })

    const b = await licensed({ expires_at: new Date(Date.now() + 1500).toISOString() })
    expect(Date.parse(b.payload.expires_at)).toBeLessThanOrEqual(Date.parse(b.payload.key_expires_at))
    await Bun.sleep(1600)
    expect((await checkIn(h.call, b.relay, b.relayId, b.licenseId)).body).toEqual({ status: 'expired' })

    const c = await licensed()
    expect((await h.call('DELETE', `/v1/relays/${c.relayId}`, { token: acct.token })).status).toBe(204)
    expect((await checkIn(h.call, c.relay, c.relayId, c.licenseId)).body).toEqual({ status: 'deleted' })
  })
})

describe('refused check-ins change nothing', () => {
  let r: Awaited<ReturnType<typeof licensed>>
  let before: Record<string, unknown>
  beforeAll(async () => {
    r = await licensed()
    before = await state(r.relayId)
  })

  const refused = async (res: Awaited<ReturnType<typeof checkIn>>, status = 401) => {
    expectProblem(res, status, status === 401 ? 'unauthorized' : 'invalid_request')
    expect(await state(r.relayId)).toEqual(before)
  }

  test('signed by another key (a forged check-in): 401', async () => {
    const other = generateKeyPairSync('ed25519').privateKey
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { signWith: other }))
  })

  test('another relay signing for this one: 401', async () => {
    const mine = await licensed()
    await refused(await checkIn(h.call, mine.relay, r.relayId, r.licenseId))
  })

  test('t more than 5 minutes off (either way): 401', async () => {
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { t: Date.now() - 5 * 60_000 - 5_000 }))
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { t: Date.now() + 5 * 60_000 + 5_000 }))
  })

  test('no header, a malformed one, or a body changed after signing: 401', async () => {
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { header: null }))
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { header: 'garbage' }))
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { header: `t=${Date.now()}, sig=` }))
    const t = Date.now()
    const raw = JSON.stringify({ relay_id: r.relayId, license_id: r.licenseId, t, peak: 0, leases: [] })
    const header = checkInSignature(r.relay.privateKey, t, raw)
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { header, raw: raw.replace('"peak":0', '"peak":9') }))
  })

  test("the body's relay_id, license_id or t not the relay's / the header's: 401", async () => {
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { bodyOver: { relay_id: ghostId('rly') } }))
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { bodyOver: { license_id: ghostId('lic') } }))
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { bodyOver: { t: 1 } }))
  })

  test('an unknown relay or an id that is not one: 401; a token changes nothing', async () => {
    const ghost = ghostId('rly')
    expectProblem(await checkIn(h.call, r.relay, ghost, r.licenseId), 401, 'unauthorized')
    expectProblem(await checkIn(h.call, r.relay, 'not-an-id', r.licenseId), 401, 'unauthorized')
    const token = await scopedToken(h.call, acct.token, 'offline:write')
    const res = await h.call('POST', `/v1/relays/${r.relayId}/check-in`, { token, raw: '{}', headers: { 'content-type': 'application/json' } })
    await refused(res)
  })

  test('a signed body of the wrong shape: 400 naming the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ peak: -1 }, 'body.peak'],
      [{ peak: 'x' }, 'body.peak'],
      [{ leases: 'none' }, 'body.leases'],
      [{ leases: [{ device_fingerprint: 'abc', device_name: null, since: new Date().toISOString() }] }, 'body.leases.0.device_fingerprint'],
      [{ leases: [{ device_fingerprint: fingerprint(), device_name: null, since: 'yesterday' }] }, 'body.leases.0.since'],
    ]
    for (const [over, field] of cases) {
      const res = await checkIn(h.call, r.relay, r.relayId, r.licenseId, { bodyOver: over })
      expectProblem(res, 400, 'invalid_request')
      expect(res.body.errors[0].field).toBe(field)
      expect(await state(r.relayId)).toEqual(before)
    }
    const t = Date.now()
    const raw = 'not json'
    await refused(await checkIn(h.call, r.relay, r.relayId, r.licenseId, { header: checkInSignature(r.relay.privateKey, t, raw), raw }), 400)
  })

  test('rate limited: a relay past 2 genuine check-ins a second (burst 10), then an address past 200 calls at once; 429 with Retry-After', async () => {
    const mine = await licensed()
    const answers = []
    for (let i = 0; i < 14; i++) answers.push(await checkIn(h.call, mine.relay, mine.relayId, mine.licenseId))
    const limited = answers.filter((a) => a.status === 429)
    expect(limited.length).toBeGreaterThan(0)
    expect(limited[0]!.body.code).toBe('rate_limited')
    expect(Number(limited[0]!.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(10)
    // forged calls for a relay's id do not use up its own check-ins
    const other = generateKeyPairSync('ed25519').privateKey
    const fresh = await licensed()
    for (let i = 0; i < 12; i++) expect((await checkIn(h.call, fresh.relay, fresh.relayId, fresh.licenseId, { signWith: other })).status).toBe(401)
    expect((await checkIn(h.call, fresh.relay, fresh.relayId, fresh.licenseId)).status).toBe(200)
    // the address: made-up ids, refused before any database work, until its bucket is empty (the last test of the file)
    const flood = await Promise.all(Array.from({ length: 260 }, () => checkIn(h.call, mine.relay, 'x', mine.licenseId, { header: null })))
    expect(flood.some((a) => a.status === 429)).toBe(true)
    expect(flood.every((a) => a.status === 401 || a.status === 429)).toBe(true)
  })
})

/** Keeps the RelayIdentity import used as a type in helpers above. */
export type { RelayIdentity }

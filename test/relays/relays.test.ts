// Relays, the cloud side (docs/api.md, "Relays"): licensing a relay out of a key's seats, the relay
// license and its certificate (checked with node:crypto only), the key's view, delete, and the refusals
// that change nothing.
import { beforeAll, describe, expect, test } from 'bun:test'
import { fingerprint, newKey, scopedToken, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ghostId, ID, ISO_MS } from '../support/helpers'
import { offlineAccount } from '../support/offline'
import { rootKeyOf } from '../support/signing'
import { certificateOf, createRelay, envelopeOf, payloadOf, relayIdentity, requestCode } from '../support/relays'

const h = useHarness()
let acct: { id: string; token: string }
let productId: string
let rootRaw: string
beforeAll(async () => {
  ;({ acct, productId } = await offlineAccount(h))
  rootRaw = (await h.call('GET', '/v1/offline/public-key', { token: acct.token })).body.public_key
}, 60_000)

const validate = (key: { key_value: string }, device = fingerprint()) =>
  h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: device } })
const detail = async (keyId: string) => (await h.call('GET', `/v1/keys/${keyId}`, { token: acct.token })).body
const relayRows = (keyId: string) => h.node.deps.sql`select id, seats, deleted_at from relays where key_id = ${keyId} order by created_at`

describe('licensing a relay', () => {
  test('201: the relay license (payload, envelope, certificate) verifies from the pinned root; the seats count on the key', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 10, plan: 'pro', entitlements: { cad: true } })
    const relay = relayIdentity('lab 3')
    const token = await scopedToken(h.call, acct.token, 'offline:write')
    const res = await createRelay(h.call, token, key.id, { request: requestCode(relay), seats: 4 })
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['relay_id', 'relay_license'])
    expect(res.body.relay_id).toMatch(ID('rly'))

    const envelope = envelopeOf(res.body.relay_license) as any
    expect(envelope.certificate).toBeUndefined() // the root signs while no signing key is active
    const root = rootKeyOf(rootRaw)
    const { verify } = await import('node:crypto')
    expect(verify(null, Buffer.from(`license/${envelope.enc}`), root, Buffer.from(envelope.sig, 'base64'))).toBe(true)
    const p = payloadOf(res.body.relay_license)
    expect(Object.keys(p)).toEqual([
      'v', 'kind', 'id', 'relay_id', 'account_id', 'key_id', 'product_id', 'plan', 'entitlements', 'seats', 'lease_seconds',
      'relay_public_key', 'device_fingerprint', 'key_expires_at', 'issued_at', 'expires_at', 'kid',
    ])
    expect(p).toMatchObject({
      v: 2, kind: 'relay', relay_id: res.body.relay_id, account_id: acct.id, key_id: key.id, product_id: productId, plan: 'pro',
      entitlements: { cad: true }, seats: 4, lease_seconds: 900, relay_public_key: relay.raw.toString('base64'),
      device_fingerprint: relay.fingerprint, key_expires_at: null, kid: envelope.kid,
    })
    expect(p.id).toMatch(ID('lic'))
    expect(p.issued_at).toMatch(ISO_MS)
    expect(Date.parse(p.expires_at) - Date.parse(p.issued_at)).toBe(30 * 86_400_000)

    // the relay's certificate: signed by the license's signer (the root here), kid = relay_id, with its scope
    const cert = certificateOf(envelope.relay_certificate, root)
    expect(cert.signed).toBe(true)
    expect(cert.payload).toEqual({
      kid: res.body.relay_id,
      public_key: relay.raw.toString('base64'),
      account_id: acct.id,
      created_at: p.issued_at,
      scope: { relay_id: res.body.relay_id, key_id: key.id, seats: 4, expires_at: p.expires_at },
    })
    expect(Object.keys(cert.payload)).toEqual(['kid', 'public_key', 'account_id', 'created_at', 'scope'])

    const d = await detail(key.id)
    expect(d.activations_used).toBe(4)
    expect(d.relays).toEqual([{ id: res.body.relay_id, name: 'lab 3', seats: 4, expires_at: p.expires_at, last_check_in_at: null, peak: 0 }])
    const listed = await h.call('GET', `/v1/keys/${key.id}/relays`, { token: await scopedToken(h.call, acct.token, 'keys:read') })
    expect(listed.status).toBe(200)
    expect(listed.body.data).toEqual([
      {
        id: res.body.relay_id, key_id: key.id, product_id: productId, name: 'lab 3', seats: 4, lease_seconds: 900, ttl_seconds: 2_592_000,
        public_key: relay.raw.toString('base64'), device_fingerprint: relay.fingerprint, components: relay.components, license_id: p.id,
        issued_at: p.issued_at, expires_at: p.expires_at, created_at: listed.body.data[0].created_at, last_check_in_at: null, leases: null, peak: 0,
      },
    ])
    const events = await eventsOf(h, acct.id, 'relay.created')
    const mine = events.filter((e) => e.data.relay.id === res.body.relay_id)
    expect(mine.length).toBe(1)
    expect(mine[0]!.data).toEqual({ relay: listed.body.data[0], key_id: key.id, product_id: productId })
    // no secret in the event: the relay's public key only
    expect(JSON.stringify(mine[0]!.data)).not.toContain(key.key_value)
  })

  test('a valid validate counts the relay seats; a new device past the remaining seats is refused', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    const first = await validate(key)
    expect(first.body).toMatchObject({ valid: true, activations_used: 1, activation_limit: 3 })
    const res = await createRelay(h.call, acct.token, key.id, { request: requestCode(relayIdentity()), seats: 2 })
    expect(res.status).toBe(201)
    // the key was dropped from memory: the known device's answer counts the relay now
    const again = await validate(key, (await detail(key.id)).activations[0].device_fingerprint)
    expect(again.body).toMatchObject({ valid: true, activations_used: 3, activation_limit: 3 })
    const refused = await validate(key)
    expect(refused.body).toEqual({ valid: false, reason: 'activation_limit' })
    const devices = await h.call('POST', '/v1/devices', { token: acct.token, body: { key: key.key_value } })
    expect(devices.body.activations_used).toBe(3)
    expect((await detail(key.id)).activations.length).toBe(1)
  })

  test('the same request again: 200, the same relay_id and license id, a renewed license with the new terms, no second event', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 10 })
    const relay = relayIdentity()
    const first = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 2 })
    await Bun.sleep(5)
    const again = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay, { name: 'renamed' }), seats: 5, lease_seconds: 60, ttl_seconds: 3600 })
    expect(again.status).toBe(200)
    expect(again.body.relay_id).toBe(first.body.relay_id)
    const p1 = payloadOf(first.body.relay_license)
    const p2 = payloadOf(again.body.relay_license)
    expect(p2.id).toBe(p1.id)
    expect(p2.issued_at > p1.issued_at).toBe(true)
    expect(p2).toMatchObject({ seats: 5, lease_seconds: 60 })
    expect(Date.parse(p2.expires_at) - Date.parse(p2.issued_at)).toBe(3_600_000)
    const d = await detail(key.id)
    expect(d.activations_used).toBe(5)
    expect(d.relays).toHaveLength(1)
    expect(d.relays[0]).toMatchObject({ name: 'renamed', seats: 5 })
    expect((await eventsOf(h, acct.id, 'relay.created')).filter((e) => e.data.key_id === key.id)).toHaveLength(1)
    // a raise past the free seats (its own counted free) is refused and changes nothing
    await validate(key)
    await validate(key)
    await validate(key)
    await validate(key)
    await validate(key)
    const over = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 6 })
    expectProblem(over, 409, 'activation_limit')
    expect((await relayRows(key.id)).map((r) => r.seats)).toEqual([5])
  })

  test('the same request for another key licenses a second relay (the request names no key)', async () => {
    const relay = relayIdentity()
    const a = await newKey(h.call, acct.token, productId, { activation_limit: 2 })
    const b = await newKey(h.call, acct.token, productId, { activation_limit: 2 })
    const ra = await createRelay(h.call, acct.token, a.id, { request: requestCode(relay), seats: 1 })
    const rb = await createRelay(h.call, acct.token, b.id, { request: requestCode(relay), seats: 2 })
    expect([ra.status, rb.status]).toEqual([201, 201])
    expect(ra.body.relay_id).not.toBe(rb.body.relay_id)
    expect(payloadOf(rb.body.relay_license).key_id).toBe(b.id)
  })

  test('seats over the limit: 400 naming body.seats; over the free seats: 409 activation_limit; nothing changes', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    const relay = relayIdentity()
    expectProblem(await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 4 }), 400, 'invalid_request')
    const over = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 4 })
    expect(over.body.errors).toEqual([{ field: 'body.seats', message: "must be at most the key's activation_limit (3)" }])
    await validate(key)
    await validate(key)
    const busy = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 2 })
    expectProblem(busy, 409, 'activation_limit')
    expect(await relayRows(key.id)).toHaveLength(0)
    expect((await detail(key.id)).activations_used).toBe(2)
    for (const seats of [0, -1, 1.5, '2', null]) {
      expectProblem(await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats }), 400, 'invalid_request')
    }
    expectProblem(await createRelay(h.call, acct.token, key.id, { request: requestCode(relay) }), 400, 'invalid_request')
    for (const extra of [{ lease_seconds: 59 }, { lease_seconds: 86_401 }, { ttl_seconds: 3599 }, { ttl_seconds: 31_536_001 }]) {
      const res = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 1, ...extra })
      expectProblem(res, 400, 'invalid_request')
      expect(res.body.errors[0].field).toBe(`body.${Object.keys(extra)[0]}`)
    }
    expect(await relayRows(key.id)).toHaveLength(0)
  })

  test('a malformed request code is 400 naming the field, and changes nothing', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    const r = relayIdentity()
    const cases: [string, string][] = [
      ['not a code', 'request'],
      ['KWRLY1.', 'request'],
      ['KWRLY1.!!!', 'request'],
      [`KWREQ1.${Buffer.from('{}').toString('base64url')}`, 'request'],
      [`KWRLY1.${Buffer.from('[1]').toString('base64url')}`, 'request'],
      [`KWRLY1.${Buffer.from('{"v":1').toString('base64url')}`, 'request'],
      [requestCode(r, { v: 2 }), 'request.v'],
      [requestCode(r, { relay_public_key: r.raw.subarray(0, 31).toString('base64url') }), 'request.relay_public_key'],
      [requestCode(r, { relay_public_key: r.raw.toString('base64') + '=' }), 'request.relay_public_key'],
      [requestCode(r, { relay_public_key: 42 }), 'request.relay_public_key'],
      [requestCode(r, { device_fingerprint: 'abc' }), 'request.device_fingerprint'],
      [requestCode(r, { components: undefined }), 'request.components'],
      [requestCode(r, { components: {} }), 'request.components'],
      [requestCode(r, { components: { disk: 'xyz' } }), 'request.components.disk'],
      [requestCode(r, { components: { 'Bad Name': 'a'.repeat(64) } }), 'request.components'],
      [requestCode(r, { name: '' }), 'request.name'],
      [requestCode(r, { name: 'a\u0007b' }), 'request.name'],
      [requestCode(r, { name: 'x'.repeat(201) }), 'request.name'],
    ]
    for (const [request, field] of cases) {
      const res = await createRelay(h.call, acct.token, key.id, { request, seats: 1 })
      expectProblem(res, 400, 'invalid_request')
      expect({ request: request.slice(0, 60), field: res.body.errors?.[0]?.field }).toEqual({ request: request.slice(0, 60), field })
    }
    const long = await createRelay(h.call, acct.token, key.id, { request: 'KWRLY1.' + 'A'.repeat(5000), seats: 1 })
    expectProblem(long, 400, 'invalid_request')
    expect(await relayRows(key.id)).toHaveLength(0)
    expect((await eventsOf(h, acct.id, 'relay.created')).filter((e) => e.data.key_id === key.id)).toHaveLength(0)
  })

  test('a revoked, suspended or expired key: 409 key_revoked / key_suspended / key_expired; an unknown key 404', async () => {
    const relay = relayIdentity()
    const revoked = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token: acct.token, body: {} })
    expectProblem(await createRelay(h.call, acct.token, revoked.id, { request: requestCode(relay), seats: 1 }), 409, 'key_revoked')
    const suspended = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    await h.call('POST', `/v1/keys/${suspended.id}/suspend`, { token: acct.token, body: {} })
    expectProblem(await createRelay(h.call, acct.token, suspended.id, { request: requestCode(relay), seats: 1 }), 409, 'key_suspended')
    const expired = await newKey(h.call, acct.token, productId, { activation_limit: 3, expires_at: new Date(Date.now() + 1500).toISOString() })
    await Bun.sleep(1600)
    expectProblem(await createRelay(h.call, acct.token, expired.id, { request: requestCode(relay), seats: 1 }), 409, 'key_expired')
    expectProblem(await createRelay(h.call, acct.token, ghostId('key'), { request: requestCode(relay), seats: 1 }), 404, 'not_found')
    expectProblem(await createRelay(h.call, acct.token, 'nope', { request: requestCode(relay), seats: 1 }), 404, 'not_found')
    for (const k of [revoked, suspended, expired]) expect(await relayRows(k.id)).toHaveLength(0)
  })

  test('another account sees nothing: 404 for its key, its relays and its relay delete', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    const res = await createRelay(h.call, acct.token, key.id, { request: requestCode(relayIdentity()), seats: 1 })
    const other = await h.account()
    expectProblem(await createRelay(h.call, other.token, key.id, { request: requestCode(relayIdentity()), seats: 1 }), 404, 'not_found')
    expectProblem(await h.call('GET', `/v1/keys/${key.id}/relays`, { token: other.token }), 404, 'not_found')
    expectProblem(await h.call('DELETE', `/v1/relays/${res.body.relay_id}`, { token: other.token }), 404, 'not_found')
    expect((await relayRows(key.id)).map((r) => r.deleted_at)).toEqual([null])
  })

  test('scopes: offline:write creates and deletes, keys:read lists, the others are 403', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 3 })
    const reader = await scopedToken(h.call, acct.token, 'keys:read')
    const writer = await scopedToken(h.call, acct.token, 'keys:write')
    expectProblem(await createRelay(h.call, reader, key.id, { request: requestCode(relayIdentity()), seats: 1 }), 403, 'insufficient_scope')
    expectProblem(await createRelay(h.call, writer, key.id, { request: requestCode(relayIdentity()), seats: 1 }), 403, 'insufficient_scope')
    const made = await createRelay(h.call, acct.token, key.id, { request: requestCode(relayIdentity()), seats: 1 })
    expectProblem(await h.call('DELETE', `/v1/relays/${made.body.relay_id}`, { token: reader }), 403, 'insufficient_scope')
    expectProblem(await h.call('GET', `/v1/keys/${key.id}/relays`, { token: await scopedToken(h.call, acct.token, 'offline:write') }), 403, 'insufficient_scope')
    expectProblem(await h.call('GET', `/v1/keys/${key.id}/relays`), 401, 'unauthorized')
  })
})

describe('deleting a relay', () => {
  test('204: its seats return at once (a new device validates), an event, then 404; the same request licenses a new relay', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 2 })
    const relay = relayIdentity()
    const made = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 2 })
    expect((await validate(key)).body).toEqual({ valid: false, reason: 'activation_limit' })
    const del = await h.call('DELETE', `/v1/relays/${made.body.relay_id}`, { token: await scopedToken(h.call, acct.token, 'offline:write') })
    expect(del.status).toBe(204)
    expect((await validate(key)).body).toMatchObject({ valid: true, activations_used: 1 })
    const d = await detail(key.id)
    expect(d.relays).toEqual([])
    expect(d.activations_used).toBe(1)
    expect((await h.call('GET', `/v1/keys/${key.id}/relays`, { token: acct.token })).body.data).toEqual([])
    const events = (await eventsOf(h, acct.id, 'relay.deleted')).filter((e) => e.data.key_id === key.id)
    expect(events).toHaveLength(1)
    expect(events[0]!.data.relay.id).toBe(made.body.relay_id)
    expectProblem(await h.call('DELETE', `/v1/relays/${made.body.relay_id}`, { token: acct.token }), 404, 'not_found')
    expectProblem(await h.call('DELETE', `/v1/relays/${ghostId('rly')}`, { token: acct.token }), 404, 'not_found')
    expectProblem(await h.call('DELETE', '/v1/relays/nope', { token: acct.token }), 404, 'not_found')
    const again = await createRelay(h.call, acct.token, key.id, { request: requestCode(relay), seats: 1 })
    expect(again.status).toBe(201)
    expect(again.body.relay_id).not.toBe(made.body.relay_id)
  })
})

describe('with a signing key active', () => {
  test("the license's envelope carries the signer's certificate; the relay's certificate is signed by the signing key", async () => {
    const { acct: a, productId: p } = await offlineAccount(h)
    const created = await h.call('POST', '/v1/signing-keys', { token: a.token, body: {} })
    await h.call('POST', `/v1/signing-keys/${created.body.kid}/activate`, { token: a.token })
    const key = await newKey(h.call, a.token, p, { activation_limit: 3 })
    const res = await createRelay(h.call, a.token, key.id, { request: requestCode(relayIdentity()), seats: 1 })
    expect(res.status).toBe(201)
    const envelope = envelopeOf(res.body.relay_license) as any
    expect(envelope.kid).toBe(created.body.kid)
    expect(envelope.certificate).toBe(created.body.certificate)
    const signer = rootKeyOf(created.body.public_key)
    expect(certificateOf(envelope.relay_certificate, signer).signed).toBe(true)
    const root = rootKeyOf((await h.call('GET', '/v1/offline/public-key', { token: a.token })).body.public_key)
    expect(certificateOf(envelope.relay_certificate, root).signed).toBe(false)
  })
})

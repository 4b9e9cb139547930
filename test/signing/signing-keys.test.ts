// Signing keys under the account's root (docs/api.md, "Signing keys"; docs/integrating.md, "Keys you
// can rotate"): create, activate, revoke and schedule; what signs answers and licenses after each; the
// key set; and the refusals, which change nothing. Verified the way an app holding only the pinned
// root does (test/support/signing.ts).
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { activateDueKeys } from '../../src/modules/signing/service'
import { eventsOf, expectProblem } from '../support/helpers'
import { fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { envelopeOf, payloadOf, verifiesWith } from '../support/offline'
import { answerSigner, certifiedKey, keySetVerifies, kidOfRaw, rootKeyOf } from '../support/signing'
import type { KeyObject } from 'node:crypto'

setDefaultTimeout(60_000)
// A real socket (POST /v1/validate through the fast path); the sweeps wait an hour, so this file runs the activation sweep itself.
const h = useHarness({ env: { SWEEP_INTERVAL_MS: '3600000' } })

interface Account {
  id: string
  token: string
  appToken: string
  root: KeyObject
  rootKid: string
  rootPem: string
  keyValue: string
  keyId: string
}

async function account(): Promise<Account> {
  const { id, token } = await h.account('growth')
  const pub = (await h.call('GET', '/v1/offline/public-key', { token })).body
  const key = await newKey(h.call, token, (await newProduct(h.call, token)).id, { activation_limit: 100 })
  return {
    id,
    token,
    appToken: await scopedToken(h.call, token, 'validate'),
    root: rootKeyOf(pub.public_key),
    rootKid: pub.kid,
    rootPem: pub.public_key_pem,
    keyValue: key.key_value,
    keyId: key.id,
  }
}

/** A signed validate through the fast path: the kid that signed it, checked with the root alone. */
async function signedValidate(a: Account): Promise<string | null> {
  const nonce = randomBytes(24).toString('base64url')
  const sent = JSON.stringify({ key: a.keyValue, device_fingerprint: fingerprint() })
  const res = await fetch(`${h.node.url}/v1/validate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.appToken}`, 'content-type': 'application/json', 'keyward-nonce': nonce },
    body: sent,
  })
  const bytes = new Uint8Array(await res.arrayBuffer())
  expect(res.status).toBe(200)
  return answerSigner({ root: a.root, rootKid: a.rootKid, accountId: a.id }, res.headers, '/v1/validate', nonce, sent, bytes)
}

const create = (a: Account, body: unknown = {}, headers?: Record<string, string>) => h.call('POST', '/v1/signing-keys', { token: a.token, body, headers })
const keySet = async (a: Account, path = '/v1/signing-keys') => {
  const res = await h.call('GET', path, { token: a.appToken })
  expect(res.status).toBe(200)
  return res.body
}

let a: Account
beforeAll(async () => {
  a = await account()
})

describe('create', () => {
  test('201 pending, with a certificate the root signed for this account; the key set lists it, signed by the root', async () => {
    const res = await create(a)
    expect(res.status).toBe(201)
    const k = res.body
    expect(Object.keys(k).sort()).toEqual(['activate_at', 'activated_at', 'certificate', 'created_at', 'kid', 'public_key', 'revoked_at', 'state'])
    expect(k).toMatchObject({ state: 'pending', activate_at: null, activated_at: null, revoked_at: null })
    expect(k.kid).toBe(kidOfRaw(k.public_key))
    expect(Buffer.from(k.public_key, 'base64')).toHaveLength(32)
    const certified = certifiedKey(a.root, k.certificate, a.id)
    expect(certified).toMatchObject({ kid: k.kid, created_at: k.created_at })
    expect(certifiedKey(a.root, k.certificate, 'acct_someone_else')).toBeNull()

    const set = await keySet(a)
    expect(Object.keys(set)).toEqual(['root', 'keys', 'issued_at', 'signature'])
    expect(set.root).toEqual({ kid: a.rootKid, public_key: expect.any(String) })
    expect(keySetVerifies(a.root, set)).toBe(true)
    expect(keySetVerifies(a.root, { ...set, keys: set.keys.slice(1) })).toBe(false)
    const listed = set.keys.find((x: any) => x.kid === k.kid)
    expect(listed).toEqual({ kid: k.kid, public_key: k.public_key, state: 'pending', certificate: k.certificate, created_at: k.created_at, activate_at: null, activated_at: null, revoked_at: null })
    // the apps' door answers the same body
    const forApps = await keySet(a, '/v1/offline/keys')
    expect(keySetVerifies(a.root, forApps)).toBe(true)
    expect(forApps.keys).toEqual(set.keys)
    // the event, with the key object; nothing private anywhere
    const events = await eventsOf(h, a.id, 'signing_key.created')
    expect(events.map((e) => e.data)).toContainEqual(k)
    expect(JSON.stringify([k, set, events])).not.toMatch(/PRIVATE|private_key/)
    // still the root signing: creating does not activate
    expect(await signedValidate(a)).toBe(a.rootKid)
  })

  test('Idempotency-Key: the same request answers the same key once', async () => {
    const b = await account()
    const headers = { 'idempotency-key': `sk-${Math.random()}` }
    const first = await create(b, {}, headers)
    const again = await create(b, {}, headers)
    expect(first.status).toBe(201)
    expect(again.status).toBe(201)
    expect(again.body).toEqual(first.body)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect((await keySet(b)).keys).toHaveLength(1)
  })

  test('bad input changes nothing: a malformed or past activate_at, a 17th key', async () => {
    const b = await account()
    for (const activate_at of ['tomorrow', '2026-13-01T00:00:00Z', 12]) {
      const res = await create(b, { activate_at })
      expectProblem(res, 400, 'invalid_request')
    }
    const past = await create(b, { activate_at: new Date(Date.now() - 60_000).toISOString() })
    expectProblem(past, 400, 'invalid_request')
    expect(past.body.errors).toEqual([{ field: 'body.activate_at', message: 'must be in the future' }])
    expect((await keySet(b)).keys).toEqual([])

    const made = []
    for (let i = 0; i < 16; i++) made.push((await create(b)).body.kid)
    expectProblem(await create(b), 409, 'signing_key_limit')
    expect((await keySet(b)).keys).toHaveLength(16)
    // a revoked key does not count
    expect((await h.call('POST', `/v1/signing-keys/${made[0]}/revoke`, { token: b.token, body: {} })).status).toBe(200)
    expect((await create(b)).status).toBe(201)
    expectProblem(await create(b), 409, 'signing_key_limit')
    expect((await eventsOf(h, b.id, 'signing_key.created'))).toHaveLength(17)
  })

  test('writes need full_access; reads take any scope', async () => {
    expectProblem(await h.call('POST', '/v1/signing-keys', { token: a.appToken, body: {} }), 403, 'insufficient_scope')
    expectProblem(await h.call('GET', '/v1/signing-keys'), 401, 'unauthorized')
  })
})

describe('activate and revoke', () => {
  test('activate: answers and licenses are signed by the new key with its certificate; the previous key retires', async () => {
    const b = await account()
    const first = (await create(b)).body
    const second = (await create(b)).body
    const on = await h.call('POST', `/v1/signing-keys/${first.kid}/activate`, { token: b.token })
    expect(on.status).toBe(200)
    expect(on.body).toMatchObject({ kid: first.kid, state: 'active', activated_at: expect.any(String) })
    expect(await signedValidate(b)).toBe(first.kid)
    // again: a no-op (no second event)
    expect((await h.call('POST', `/v1/signing-keys/${first.kid}/activate`, { token: b.token })).body).toEqual(on.body)

    // a license: v2, kid inside, the certificate beside sig; verifies with the certified key, not the root
    const issued = await h.call('POST', `/v1/keys/${b.keyId}/offline-licenses`, { token: b.token, body: { device_fingerprint: fingerprint() } })
    expect(issued.status).toBe(201)
    const envelope = envelopeOf(issued.body.license)
    expect(envelope.kid).toBe(first.kid)
    expect(payloadOf(issued.body.license)).toMatchObject({ v: 2, kid: first.kid })
    const certified = certifiedKey(b.root, envelope.certificate!, b.id)!
    expect(certified.kid).toBe(first.kid)
    expect(verifiesWith(certified.publicKey.export({ format: 'pem', type: 'spki' }).toString(), issued.body.license)).toBe(true)
    expect(verifiesWith(b.rootPem, issued.body.license)).toBe(false)

    // the second takes over; the first is retired (still listed, still verifies)
    expect((await h.call('POST', `/v1/signing-keys/${second.kid}/activate`, { token: b.token })).body.state).toBe('active')
    expect(await signedValidate(b)).toBe(second.kid)
    const states = Object.fromEntries((await keySet(b)).keys.map((k: any) => [k.kid, k.state]))
    expect(states).toEqual({ [first.kid]: 'retired', [second.kid]: 'active' })
    // a retired key may be activated again
    expect((await h.call('POST', `/v1/signing-keys/${first.kid}/activate`, { token: b.token })).body.state).toBe('active')
    expect(await signedValidate(b)).toBe(first.kid)
    expect((await eventsOf(h, b.id, 'signing_key.activated')).map((e) => e.data.kid)).toEqual([first.kid, second.kid, first.kid])

    // the old license (signed by first) syncs valid and comes back signed by the current signer
    const synced = await h.call('POST', '/v1/offline-licenses/sync', { token: b.token, body: { licenses: [issued.body.license] } })
    expect(synced.body.results[0].status).toBe('valid')
  })

  test('revoke the active key: the root signs again; a license it signed syncs valid, re-signed by the current signer', async () => {
    const b = await account()
    const k = (await create(b)).body
    await h.call('POST', `/v1/signing-keys/${k.kid}/activate`, { token: b.token })
    const issued = await h.call('POST', `/v1/keys/${b.keyId}/offline-licenses`, { token: b.token, body: { device_fingerprint: fingerprint() } })
    expect(envelopeOf(issued.body.license).kid).toBe(k.kid)

    const off = await h.call('POST', `/v1/signing-keys/${k.kid}/revoke`, { token: b.token, body: { reason: 'leaked' } })
    expect(off.status).toBe(200)
    expect(off.body).toMatchObject({ kid: k.kid, state: 'revoked', revoked_at: expect.any(String) })
    expect(await signedValidate(b)).toBe(b.rootKid)
    const listed = (await keySet(b)).keys.find((x: any) => x.kid === k.kid)
    expect(listed.state).toBe('revoked')

    const [result] = (await h.call('POST', '/v1/offline-licenses/sync', { token: b.token, body: { licenses: [issued.body.license] } })).body.results
    expect(result.status).toBe('valid')
    expect(envelopeOf(result.license).kid).toBe(b.rootKid)
    expect(envelopeOf(result.license).certificate).toBeUndefined()
    expect(payloadOf(result.license)).toMatchObject({ v: 2, kid: b.rootKid, id: issued.body.id })
    expect(verifiesWith(b.rootPem, result.license)).toBe(true)
    // ... unless the license key itself is revoked
    await h.call('POST', `/v1/keys/${b.keyId}/revoke`, { token: b.token, body: {} })
    expect((await h.call('POST', '/v1/offline-licenses/sync', { token: b.token, body: { licenses: [issued.body.license] } })).body.results[0].status).toBe('revoked')

    // revoked is final: activating it is 409 and changes nothing; revoking again is a no-op
    expectProblem(await h.call('POST', `/v1/signing-keys/${k.kid}/activate`, { token: b.token }), 409, 'signing_key_revoked')
    expect((await h.call('POST', `/v1/signing-keys/${k.kid}/revoke`, { token: b.token, body: {} })).body).toEqual(off.body)
    expect(await signedValidate(b)).toBe(b.rootKid)
    expect(await eventsOf(h, b.id, 'signing_key.revoked')).toHaveLength(1)
  })

  test('an unknown kid or another account\'s kid is 404, and nothing changes', async () => {
    const b = await account()
    const mine = (await create(b)).body
    const theirs = (await create(a)).body
    for (const kid of [theirs.kid, 'f'.repeat(32), 'not-a-kid']) {
      expectProblem(await h.call('POST', `/v1/signing-keys/${kid}/activate`, { token: b.token }), 404, 'not_found')
      expectProblem(await h.call('POST', `/v1/signing-keys/${kid}/revoke`, { token: b.token, body: {} }), 404, 'not_found')
    }
    expect((await keySet(a)).keys.find((x: any) => x.kid === theirs.kid).state).toBe('pending')
    expect((await keySet(b)).keys.map((x: any) => [x.kid, x.state])).toEqual([[mine.kid, 'pending']])
  })
})

describe('scheduled activation', () => {
  test('activate_at: the node switches at that time by itself; the sweeper records it once, actor system', async () => {
    const b = await account()
    const at = new Date(Date.now() + 1500)
    const k = (await create(b, { activate_at: at.toISOString() })).body
    expect(k).toMatchObject({ state: 'pending', activate_at: at.toISOString() })
    // the key set shows the schedule (the console reads it there)
    expect((await keySet(b)).keys.find((x: any) => x.kid === k.kid)).toMatchObject({ state: 'pending', activate_at: at.toISOString() })
    expect(await signedValidate(b)).toBe(b.rootKid)
    while (Date.now() <= at.getTime()) await Bun.sleep(50)
    // no sweep has run: the node computes it from the time alone
    expect(await signedValidate(b)).toBe(k.kid)
    const listed = (await keySet(b)).keys.find((x: any) => x.kid === k.kid)
    expect(listed).toMatchObject({ state: 'active', activate_at: null, activated_at: at.toISOString() })

    expect(await activateDueKeys(h.node.deps)).toBeGreaterThanOrEqual(1)
    expect(await activateDueKeys(h.node.deps)).toBe(0)
    const [row] = await h.node.deps.sql<{ type: string; actor_type: string; data: any }[]>`
      select type, actor_type, data from events where account_id = ${b.id} and type = 'signing_key.activated'`
    expect(row).toMatchObject({ actor_type: 'system', data: { kid: k.kid, state: 'active', activated_at: at.toISOString() } })
    expect(await signedValidate(b)).toBe(k.kid)
  })
})

// Air-gapped activation and deactivation over HTTP (docs/api.md, "Air-gapped activation"): the request
// decided as validate, the response license, one seat per code, the signed deactivation and its
// receipt, and every bad input.
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createPublicKey, generateKeyPairSync } from 'node:crypto'
import { fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { expectProblem, ID, ISO_MS } from '../support/helpers'
import { offlineAccount, payloadOf, verifiesWith, envelopeOf } from '../support/offline'
import { deactivationCode, licenseOfResponse, newDevice, rawRequest, receiptOf, receiptVerifies, requestCode, type Device } from '../support/air-gapped'
import { rootKeyOf } from '../support/signing'

setDefaultTimeout(60_000)
const h = useHarness({ socket: false })
let acct: { id: string; token: string }
let productId: string
let publicKeyPem: string
beforeAll(async () => {
  ;({ acct, productId, publicKeyPem } = await offlineAccount(h))
}, 60_000)

const activate = (body: unknown, token: string | null = acct.token) => h.call('POST', '/v1/offline/activations', { token, body })
const deactivate = (code: unknown, token: string | null = acct.token) => h.call('POST', '/v1/offline/deactivations', { token, body: { code } })
const sql = () => h.node.deps.sql
const activations = (keyId: string) => sql()<{ id: string; status: string; device_public_key: string | null; deactivation_reason: string | null }[]>`
  select id, status, device_public_key, deactivation_reason from activations where key_id = ${keyId} order by activated_at`
const hex = (c: string) => c.repeat(64)

async function activated(extra: Record<string, unknown> = {}, device: Device = newDevice()) {
  const key = await newKey(h.call, acct.token, productId, extra)
  const req = requestCode(device, key.key_value, { device_name: 'Lab PC 3' })
  const res = await activate({ request: req.code })
  expect(res.status).toBe(201)
  const license = licenseOfResponse(res.body.response)
  return { key, device, req, res, license, payload: payloadOf(license) }
}

describe('activation', () => {
  test('201: a response code holding a license signed by the root, with the seat, the device key and the nonce', async () => {
    const { key, device, req, res, license, payload } = await activated({ plan: 'pro' })
    expect(res.body.activation_id).toMatch(ID('act'))
    expect(verifiesWith(publicKeyPem, license)).toBe(true)
    expect(payload).toMatchObject({
      v: 2,
      account_id: acct.id,
      key_id: key.id,
      product_id: productId,
      plan: 'pro',
      device_fingerprint: device.fingerprint,
      activation_id: res.body.activation_id,
      device_public_key: device.publicKeyRaw,
      request_nonce: req.nonce,
      components: null,
      component_match: 'off',
      kid: envelopeOf(license).kid,
    })
    expect(payload.id).toMatch(ID('lic'))
    expect(payload.issued_at).toMatch(ISO_MS)
    // 30 days by default
    expect(Date.parse(payload.expires_at) - Date.parse(payload.issued_at)).toBe(30 * 86400 * 1000)
    const rows = await activations(key.id)
    expect([...rows]).toEqual([{ id: res.body.activation_id, status: 'active', device_public_key: device.publicKeyRaw, deactivation_reason: null }])
    // the activation object marks the seat as air-gapped (key detail, events)
    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token: acct.token })
    expect(detail.body.activations[0]).toMatchObject({ id: res.body.activation_id, offline: true, device_name: 'Lab PC 3' })
    const [created] = await sql()`select data from events where type = 'activation.created' and data->'activation'->>'id' = ${res.body.activation_id}`
    expect(created.data.activation.offline).toBe(true)
    const [act] = await sql()`select device_name from activations where id = ${res.body.activation_id}`
    expect(act.device_name).toBe('Lab PC 3')
    // the license is an offline license like the others: sync renews it
    const sync = await h.call('POST', '/v1/offline-licenses/sync', { token: acct.token, body: { licenses: [license] } })
    expect(sync.body.results[0]).toMatchObject({ id: payload.id, status: 'valid' })
  })

  test('the event: activation.created by actor offline (the activation); no key value or request code stored in events', async () => {
    const { key, req, res } = await activated()
    const [ev] = await sql()`select actor_type, actor_id, data::text as data from events where account_id = ${acct.id}
      and type = 'activation.created' and data->'activation'->>'id' = ${res.body.activation_id}`
    expect(ev).toMatchObject({ actor_type: 'offline', actor_id: res.body.activation_id })
    const all = await sql()`select data::text as data from events where account_id = ${acct.id}`
    for (const e of all) {
      expect(e.data).not.toContain(key.key_value)
      expect(e.data).not.toContain(req.code.slice(7, 60))
    }
    const stored = await sql()`select * from offline_requests where activation_id = ${res.body.activation_id}`
    expect(stored).toHaveLength(1)
    expect(JSON.stringify(stored)).not.toContain(key.key_value)
    expect(stored[0].request_sha256).toMatch(/^[0-9a-f]{64}$/)
    const api = await h.call('GET', `/v1/events?type=activation.created`, { token: acct.token })
    expect(api.body.data.some((e: any) => e.actor.type === 'offline' && e.actor.id === res.body.activation_id)).toBe(true)
  })

  test('the same request again: 200, the same activation and license id, one seat', async () => {
    const { key, req, res, payload } = await activated()
    for (let i = 0; i < 3; i++) {
      const again = await activate({ request: req.code })
      expect(again.status).toBe(200)
      expect(again.body.activation_id).toBe(res.body.activation_id)
      const p = payloadOf(licenseOfResponse(again.body.response))
      expect(p.id).toBe(payload.id)
      expect(p.request_nonce).toBe(req.nonce)
    }
    expect(await activations(key.id)).toHaveLength(1)
    const [k] = await sql()`select count(*)::int as n from offline_licenses where key_id = ${key.id}`
    expect(k.n).toBe(1)
  })

  test('a device already holding a seat (validated online) gets that seat: 201, one activation', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const device = newDevice()
    const v = await h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: device.fingerprint } })
    expect(v.body.valid).toBe(true)
    const res = await activate({ request: requestCode(device, key.key_value).code })
    expect(res.status).toBe(201)
    const rows = await activations(key.id)
    expect(rows).toHaveLength(1)
    expect(rows[0]!.id).toBe(res.body.activation_id)
    expect(rows[0]!.device_public_key).toBe(device.publicKeyRaw)
    const online = await newKey(h.call, acct.token, productId)
    await h.call('POST', '/v1/validate', { token: acct.token, body: { key: online.key_value, device_fingerprint: device.fingerprint } })
    expect((await h.call('GET', `/v1/keys/${online.id}`, { token: acct.token })).body.activations[0].offline).toBe(false)
  })

  test('ttl_seconds as for offline licenses; out of range is 400', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const res = await activate({ request: requestCode(newDevice(), key.key_value).code, ttl_seconds: 7200 })
    expect(res.status).toBe(201)
    const p = payloadOf(licenseOfResponse(res.body.response))
    expect(Date.parse(p.expires_at) - Date.parse(p.issued_at)).toBe(7200 * 1000)
    expectProblem(await activate({ request: requestCode(newDevice(), key.key_value).code, ttl_seconds: 60 }), 400, 'invalid_request')
    expect(await activations(key.id)).toHaveLength(1)
  })

  test('refusals as validate: 200 valid false, nothing recorded', async () => {
    const nothing = async (keyId: string, res: any, reason: string) => {
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ valid: false, reason })
      expect(await activations(keyId)).toHaveLength(0)
    }
    const unknown = await activate({ request: requestCode(newDevice(), 'ABCDE-FGHJK-MNPQR-STVWX-YZ012').code })
    expect(unknown.body).toEqual({ valid: false, reason: 'not_found' })
    const other = await h.account()
    const foreign = await newKey(h.call, other.token, (await newProduct(h.call, other.token)).id)
    await nothing(foreign.id, await activate({ request: requestCode(newDevice(), foreign.key_value).code }), 'not_found')

    const revoked = await newKey(h.call, acct.token, productId)
    await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token: acct.token, body: {} })
    await nothing(revoked.id, await activate({ request: requestCode(newDevice(), revoked.key_value).code }), 'revoked')

    const suspended = await newKey(h.call, acct.token, productId)
    expect((await h.call('POST', `/v1/keys/${suspended.id}/suspend`, { token: acct.token, body: {} })).status).toBe(200)
    await nothing(suspended.id, await activate({ request: requestCode(newDevice(), suspended.key_value).code }), 'suspended')

    const expired = await newKey(h.call, acct.token, productId)
    await sql()`update license_keys set expires_at = now() - interval '1 day' where id = ${expired.id}`
    await h.node.deps.bus.publish({ kind: 'key', accountId: acct.id, keyHash: (await sql()`select key_hash from license_keys where id = ${expired.id}`)[0].key_hash })
    await nothing(expired.id, await activate({ request: requestCode(newDevice(), expired.key_value).code }), 'expired')

    const full = await newKey(h.call, acct.token, productId, { activation_limit: 1 })
    expect((await activate({ request: requestCode(newDevice(), full.key_value).code })).status).toBe(201)
    const limit = await activate({ request: requestCode(newDevice(), full.key_value).code })
    expect(limit.body).toEqual({ valid: false, reason: 'activation_limit' })
    expect(await activations(full.id)).toHaveLength(1)
  })

  test('the component rule: device_mismatch without components, for other components, and for a replaced fingerprint', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 5 })
    await sql()`update license_keys set component_match = 'most' where id = ${key.id}`
    const comps = { machine_id: hex('a'), disk: hex('b'), board: hex('c') }
    const device = newDevice()
    expect((await activate({ request: requestCode(device, key.key_value).code })).body).toEqual({ valid: false, reason: 'device_mismatch' })
    const ok = await activate({ request: requestCode(device, key.key_value, { components: comps }).code })
    expect(ok.status).toBe(201)
    const p = payloadOf(licenseOfResponse(ok.body.response))
    expect(p).toMatchObject({ components: comps, component_match: 'most' })
    const [stored] = await sql()`select components from activations where id = ${ok.body.activation_id}`
    expect(stored.components).toEqual(comps)
    // the same fingerprint with a set that does not match: refused
    const other = { machine_id: hex('d'), disk: hex('e'), board: hex('c') }
    expect((await activate({ request: requestCode(device, key.key_value, { components: other }).code })).body).toEqual({ valid: false, reason: 'device_mismatch' })
    // drift within the rule: the same seat (2 of 3 match)
    const drift = { machine_id: hex('a'), disk: hex('b'), board: hex('f') }
    const again = await activate({ request: requestCode(device, key.key_value, { components: drift }).code })
    expect(again.status).toBe(201)
    expect(again.body.activation_id).toBe(ok.body.activation_id)
    // a fingerprint that an active activation replaced
    const replaced = newDevice()
    await sql()`update activations set replaced_fingerprints = ${[replaced.fingerprint]} where id = ${ok.body.activation_id}`
    expect((await activate({ request: requestCode(replaced, key.key_value, { components: comps }).code })).body).toEqual({ valid: false, reason: 'device_mismatch' })
    expect(await activations(key.id)).toHaveLength(1)
  })

  test('scope validate or full_access; no token 401; another scope 403', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const validate = await scopedToken(h.call, acct.token, 'validate')
    expect((await activate({ request: requestCode(newDevice(), key.key_value).code }, validate)).status).toBe(201)
    expectProblem(await activate({ request: requestCode(newDevice(), key.key_value).code }, null), 401, 'unauthorized')
    const read = await scopedToken(h.call, acct.token, 'keys:read')
    expectProblem(await activate({ request: requestCode(newDevice(), key.key_value).code }, read), 403, 'insufficient_scope')
  })

  test('malformed request codes: 400 naming the field, nothing recorded', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const d = newDevice()
    const good = { v: 1, key: key.key_value, device_fingerprint: d.fingerprint, device_public_key: d.publicKeyRaw, nonce: 'n'.repeat(16), t: 1 }
    const cases: [unknown, string][] = [
      [{}, 'body.request'],
      [{ request: 5 }, 'body.request'],
      [{ request: '' }, 'request'],
      [{ request: 'KWREQ2.' + rawRequest(good).slice(7) }, 'request'],
      [{ request: 'KWREQ1.' }, 'request'],
      [{ request: 'KWREQ1.@@@' }, 'request'],
      [{ request: 'KWREQ1.' + Buffer.from('not json').toString('base64url') }, 'request'],
      [{ request: rawRequest([1, 2]) }, 'request'],
      [{ request: 'KWREQ1.' + 'A'.repeat(2041) }, 'request'], // 2,048 characters, not JSON
      [{ request: rawRequest({ ...good, v: 2 }) }, 'request.v'],
      [{ request: rawRequest({ ...good, key: '' }) }, 'request.key'],
      [{ request: rawRequest({ ...good, key: 7 }) }, 'request.key'],
      [{ request: rawRequest({ ...good, device_fingerprint: 'abc' }) }, 'request.device_fingerprint'],
      [{ request: rawRequest({ ...good, components: { disk: 'x' } }) }, 'request.components.disk'],
      [{ request: rawRequest({ ...good, components: {} }) }, 'request.components'],
      [{ request: rawRequest({ ...good, components: { 'Bad Name': hex('a') } }) }, 'request.components'],
      [{ request: rawRequest({ ...good, device_name: 'a\u0000b' }) }, 'request.device_name'],
      [{ request: rawRequest({ ...good, device_public_key: 'abc' }) }, 'request.device_public_key'],
      [{ request: rawRequest({ ...good, device_public_key: Buffer.alloc(32).toString('base64') + '==' }) }, 'request.device_public_key'],
      [{ request: rawRequest({ ...good, nonce: 'short' }) }, 'request.nonce'],
      [{ request: rawRequest({ ...good, nonce: 'n'.repeat(65) }) }, 'request.nonce'],
      [{ request: rawRequest({ ...good, nonce: 'has space in it!!' }) }, 'request.nonce'],
      [{ request: rawRequest({ ...good, t: 'now' }) }, 'request.t'],
      [{ request: rawRequest({ ...good, t: -1 }) }, 'request.t'],
      [{ request: rawRequest(good), ttl_seconds: 'x' }, 'body.ttl_seconds'],
    ]
    for (const [body, field] of cases) {
      const res = await activate(body)
      expectProblem(res, 400, 'invalid_request')
      expect({ body, fields: res.body.errors.map((e: any) => e.field) }).toEqual({ body, fields: expect.arrayContaining([field]) })
    }
    // over 2,048 characters: the schema's limit
    expectProblem(await activate({ request: 'KWREQ1.' + 'A'.repeat(2100) }), 400, 'invalid_request')
    expect(await activations(key.id)).toHaveLength(0)
    // and the good one passes
    expect((await activate({ request: rawRequest(good) })).status).toBe(201)
  })
})

describe('deactivation', () => {
  test('a genuine code releases the seat as a holder release and answers a receipt signed by the root', async () => {
    const { key, device, res, payload } = await activated()
    const code = deactivationCode(device, { license_id: payload.id, activation_id: res.body.activation_id })
    const out = await deactivate(code)
    expect(out.status).toBe(200)
    expect(out.body.released).toBe(true)
    const receipt = receiptOf(out.body.receipt)
    const root = (await h.call('GET', '/v1/offline/public-key', { token: acct.token })).body
    expect(receipt.certificate).toBeNull()
    expect(receipt.body).toEqual({ activation_id: res.body.activation_id, license_id: payload.id, released_at: receipt.body.released_at, kid: root.kid })
    expect(receipt.body.released_at).toMatch(ISO_MS)
    expect(receiptVerifies(receipt, rootKeyOf(root.public_key))).toBe(true)
    const rows = await activations(key.id)
    expect(rows[0]).toMatchObject({ status: 'deactivated', deactivation_reason: 'user' })
    const [k] = await sql()`select deactivations_used from license_keys where id = ${key.id}`
    expect(k.deactivations_used).toBe(1)
    const [ev] = await sql()`select actor_type, actor_id from events where type = 'activation.deactivated' and data->'activation'->>'id' = ${res.body.activation_id}`
    expect(ev).toEqual({ actor_type: 'offline', actor_id: res.body.activation_id })
    // every node forgot the device: validate no longer answers valid for it
    const v = await h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: device.fingerprint } })
    expect(v.body.activations_used).toBe(1) // a new seat for it, not the old one
    const [fresh] = await sql()`select count(*)::int as n from activations where key_id = ${key.id} and status = 'active'`
    expect(fresh.n).toBe(1)

    // the same code again: the same receipt, counted once
    const again = await deactivate(code)
    expect(again.status).toBe(200)
    expect(receiptOf(again.body.receipt).body).toEqual(receipt.body)
    const [k2] = await sql()`select deactivations_used from license_keys where id = ${key.id}`
    expect(k2.deactivations_used).toBe(1)
    // the request code again, after its seat was released: 409
  })

  test('the request code again after its seat was released: 409 request_used', async () => {
    const { device, req, res, payload } = await activated()
    expect((await deactivate(deactivationCode(device, { license_id: payload.id, activation_id: res.body.activation_id }))).body.released).toBe(true)
    expectProblem(await activate({ request: req.code }), 409, 'request_used')
  })

  test('after a rotation the same code gets the same released_at, signed by the new signer with its certificate', async () => {
    const other = await h.account()
    const product = (await newProduct(h.call, other.token)).id
    const key = await newKey(h.call, other.token, product)
    const device = newDevice()
    const res = await activate({ request: requestCode(device, key.key_value).code }, other.token)
    const payload = payloadOf(licenseOfResponse(res.body.response))
    const code = deactivationCode(device, { license_id: payload.id, activation_id: res.body.activation_id })
    const first = receiptOf((await deactivate(code, other.token)).body.receipt)
    const made = await h.call('POST', '/v1/signing-keys', { token: other.token, body: {} })
    expect((await h.call('POST', `/v1/signing-keys/${made.body.kid}/activate`, { token: other.token, body: {} })).status).toBe(200)
    const second = receiptOf((await deactivate(code, other.token)).body.receipt)
    expect(second.body.released_at).toBe(first.body.released_at)
    expect(second.body.kid).toBe(made.body.kid)
    expect(second.certificate).toBe(made.body.certificate)
    const pub = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(made.body.public_key, 'base64').toString('base64url') }, format: 'jwk' })
    expect(receiptVerifies(second, pub)).toBe(true)
  })

  test('released otherwise (admin): 200 released false, already_released; nothing counted', async () => {
    const { key, device, res, payload } = await activated()
    expect((await h.call('DELETE', `/v1/keys/${key.id}/activations/${res.body.activation_id}`, { token: acct.token })).status).toBe(200)
    const out = await deactivate(deactivationCode(device, { license_id: payload.id, activation_id: res.body.activation_id }))
    expect(out.status).toBe(200)
    expect(out.body).toEqual({ released: false, reason: 'already_released' })
    const [k] = await sql()`select deactivations_used from license_keys where id = ${key.id}`
    expect(k.deactivations_used).toBe(0)
  })

  test('past deactivations_allowed: 409 deactivation_limit, nothing released', async () => {
    const { key, device, res, payload } = await activated({ deactivations_allowed: 0 })
    expectProblem(await deactivate(deactivationCode(device, { license_id: payload.id, activation_id: res.body.activation_id })), 409, 'deactivation_limit')
    expect((await activations(key.id))[0]!.status).toBe('active')
  })

  test('forged, altered, unknown, another account: 400 invalid_deactivation, all alike, nothing released', async () => {
    const { key, device, res, payload } = await activated()
    const ids = { license_id: payload.id, activation_id: res.body.activation_id }
    const genuine = deactivationCode(device, ids)
    const stranger = generateKeyPairSync('ed25519').privateKey
    const [prefix, body, sig] = genuine.split('.')
    const flip = (s: string) => (s[5] === 'A' ? s.slice(0, 5) + 'B' + s.slice(6) : s.slice(0, 5) + 'A' + s.slice(6))
    const otherDevice = { ...device, fingerprint: fingerprint() }
    const bad: unknown[] = [
      deactivationCode(device, ids, stranger), // another key
      `${prefix}.${body}.${flip(sig!)}`, // altered signature
      `${prefix}.${flip(body!)}.${sig}`, // altered payload
      deactivationCode(device, { ...ids, license_id: `lic_${'0'.repeat(26)}` }), // unknown license
      deactivationCode(device, { ...ids, activation_id: `act_${'0'.repeat(26)}` }), // another activation
      deactivationCode(otherDevice, ids), // another fingerprint
      genuine.replace('KWDEA1', 'KWDEA2'),
      genuine + '.x',
      'KWDEA1.',
      'hello',
      '',
    ]
    const answers = []
    for (const code of bad) {
      const out = await deactivate(code)
      expectProblem(out, 400, 'invalid_deactivation')
      answers.push({ title: out.body.title, detail: out.body.detail, errors: out.body.errors })
    }
    expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1)
    const other = await h.account()
    expectProblem(await deactivate(genuine, other.token), 400, 'invalid_deactivation')
    expectProblem(await deactivate('x'.repeat(1025)), 400, 'invalid_request')
    expectProblem(await h.call('POST', '/v1/offline/deactivations', { token: acct.token, body: {} }), 400, 'invalid_request')
    expect((await activations(key.id))[0]!.status).toBe('active')
    // and the genuine one still works
    expect((await deactivate(genuine)).body.released).toBe(true)
  })
})

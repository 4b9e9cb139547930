import { beforeAll, describe, expect, test } from 'bun:test'
import { OPERATOR } from '../../src/modules/events/outbox'
import { freeSeat } from '../../src/modules/activations/repo'
import { signLicense } from '../../src/modules/offline/license'
import { Signers } from '../../src/modules/signing/signers'
import { fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { envelopeOf, issueLicense, licenseText, offlineAccount, payloadOf, verifiesWith } from '../support/offline'

const h = useHarness({ socket: false })
let acct: { id: string; token: string }
let productId: string
let publicKeyPem: string
beforeAll(async () => {
  ;({ acct, productId, publicKeyPem } = await offlineAccount(h))
}, 60_000)

const sync = (licenses: unknown, token = acct.token) =>
  h.call('POST', '/v1/offline-licenses/sync', { token, body: { licenses } })

async function issued(extraKey: Record<string, unknown> = {}, ttl_seconds = 7200, token = acct.token, product = productId) {
  const key = await newKey(h.call, token, product, extraKey)
  const res = await issueLicense(h.call, token, key.id, { device_fingerprint: fingerprint(), ttl_seconds })
  if (res.status !== 201) throw new Error(`issue failed: ${res.status} ${JSON.stringify(res.body)}`)
  return { key, ...(res.body as { id: string; license: string; expires_at: string; payload: any }) }
}

describe('sync statuses', () => {
  test('valid: a renewed license with the same id and ttl, new issued_at and expires_at', async () => {
    const lic = await issued({ plan: 'pro' })
    await Bun.sleep(5)
    const res = await sync([lic.license])
    expect(res.status).toBe(200)
    expect(res.body.results.length).toBe(1)
    const [r] = res.body.results
    expect(r.id).toBe(lic.id)
    expect(r.status).toBe('valid')
    expect(verifiesWith(publicKeyPem, r.license)).toBe(true)
    const p = payloadOf(r.license)
    expect({ ...p, issued_at: 0, expires_at: 0 }).toEqual({ ...lic.payload, issued_at: 0, expires_at: 0 })
    expect(Date.parse(p.issued_at)).toBeGreaterThan(Date.parse(lic.payload.issued_at))
    expect(Date.parse(p.expires_at) - Date.parse(p.issued_at)).toBe(7200 * 1000)
    const [row] = await h.node.deps.sql`select issued_at, expires_at from offline_licenses where id = ${lic.id}`
    expect(row.expires_at.toISOString()).toBe(p.expires_at)
    // the renewed license is itself renewable
    expect((await sync([r.license])).body.results[0].status).toBe('valid')
  })

  test('revoked key → revoked, without a license', async () => {
    const lic = await issued()
    await h.call('POST', `/v1/keys/${lic.key.id}/revoke`, { token: acct.token, body: {} })
    expect((await sync([lic.license])).body.results).toEqual([{ id: lic.id, status: 'revoked' }])
  })

  test('expired key → expired (even before the sweeper ran)', async () => {
    const lic = await issued({ expires_at: new Date(Date.now() + 3600e3).toISOString() })
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 second' where id = ${lic.key.id}`
    expect((await sync([lic.license])).body.results).toEqual([{ id: lic.id, status: 'expired' }])
  })

  test('deactivated device → deactivated; valid again once the device holds a slot again', async () => {
    const lic = await issued()
    await h.node.deps.sql.begin((tx) =>
      freeSeat(tx, { id: lic.key.id, account_id: acct.id, product_id: productId }, { fingerprint: lic.payload.device_fingerprint }, 'admin', OPERATOR, 0),
    )
    expect((await sync([lic.license])).body.results).toEqual([{ id: lic.id, status: 'deactivated' }])
    const again = await h.call('POST', `/v1/keys/${lic.key.id}/offline-licenses`, {
      token: acct.token,
      body: { device_fingerprint: lic.payload.device_fingerprint },
    })
    expect(again.status).toBe(201)
    expect((await sync([lic.license])).body.results[0].status).toBe('valid')
  })

  test('the license\'s own expiry having passed does not matter while key and slot are good', async () => {
    const lic = await issued()
    const signers = new Signers(h.node.deps.sql, h.node.deps.secretKey)
    const signer = await signers.root(acct.id)
    const old = signLicense(signer.privateKey, signer.kid, {
      ...lic.payload,
      issued_at: '2020-01-01T00:00:00.000Z',
      expires_at: '2020-01-01T02:00:00.000Z',
    })
    expect(verifiesWith(publicKeyPem, old)).toBe(true)
    const [r] = (await sync([old])).body.results
    expect(r.status).toBe('valid')
    expect(Date.parse(payloadOf(r.license).expires_at)).toBeGreaterThan(Date.now())
  })

  test('renewal never outlives the key; follows an extension', async () => {
    const keyExpiry = new Date(Date.now() + 3600e3).toISOString()
    const lic = await issued({ expires_at: keyExpiry }, 30 * 24 * 3600)
    expect(lic.expires_at).toBe(keyExpiry)
    expect(payloadOf((await sync([lic.license])).body.results[0].license).expires_at).toBe(keyExpiry)
    await h.call('POST', `/v1/keys/${lic.key.id}/extend`, { token: acct.token, body: { expires_at: null } })
    const p = payloadOf((await sync([lic.license])).body.results[0].license)
    expect(Date.parse(p.expires_at) - Date.parse(p.issued_at)).toBe(30 * 24 * 3600 * 1000)
  })

  test('invalid: garbage, tampered, another account\'s', async () => {
    const lic = await issued()
    const env = envelopeOf(lic.license)
    const tamperedPayload = { ...lic.payload, plan: 'enterprise' }
    const tampered = licenseText({ ...env, enc: Buffer.from(JSON.stringify(tamperedPayload)).toString('base64') })
    const badSig = Buffer.from(env.sig, 'base64')
    badSig[0] ^= 1
    const other = await h.account()
    const foreign = await issued({}, 7200, other.token, (await newProduct(h.call, other.token)).id)
    const res = await sync([
      '',
      'hello',
      '-----BEGIN KEYWARD LICENSE-----\nbm90IGpzb24=\n-----END KEYWARD LICENSE-----',
      lic.license.replace('-----END KEYWARD LICENSE-----', '-----END LICENSE-----'),
      tampered,
      licenseText({ ...env, sig: badSig.toString('base64') }),
      licenseText({ ...env, alg: 'base64+rsa' }),
      foreign.license,
      lic.license,
    ])
    expect(res.status).toBe(200)
    expect(res.body.results.map((r: any) => r.status)).toEqual([
      'invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'valid',
    ])
    expect(res.body.results.slice(0, 4).map((r: any) => r.id)).toEqual([null, null, null, null])
    expect(res.body.results[4]).toEqual({ id: lic.id, status: 'invalid' })
    expect(res.body.results[7]).toEqual({ id: foreign.id, status: 'invalid' })
    // and this account's license means nothing to the other account
    expect((await sync([lic.license], other.token)).body.results).toEqual([{ id: lic.id, status: 'invalid' }])
  })

  test('a license whose record is gone (deleted with its key) is invalid', async () => {
    const lic = await issued()
    await h.node.deps.sql`delete from offline_licenses where id = ${lic.id}`
    expect((await sync([lic.license])).body.results).toEqual([{ id: lic.id, status: 'invalid' }])
  })
})

describe('sync requests', () => {
  test('100 entries, in order, duplicates answered alike', async () => {
    const a = await issued()
    const licenses = Array.from({ length: 100 }, (_, i) => (i % 2 === 0 && i < 60 ? a.license : `junk ${i}`))
    const res = await sync(licenses)
    expect(res.status).toBe(200)
    expect(res.body.results.length).toBe(100)
    res.body.results.forEach((r: any, i: number) => {
      expect(r.status).toBe(i % 2 === 0 && i < 60 ? 'valid' : 'invalid')
    })
    expect(res.body.results[0].license).toBe(res.body.results[58].license)
  })

  test('0 or 101 entries, non-strings, a missing field are 400', async () => {
    for (const licenses of [[], Array(101).fill('x'), [1], [null], 'x', undefined]) {
      const res = await sync(licenses)
      expect(res.status).toBe(400)
      expect(res.body.code).toBe('invalid_request')
    }
  })

  test('a body over 256 KiB (this route\'s limit, docs/api.md, "Offline licenses") is 413', async () => {
    const res = await sync(['x'.repeat(257 * 1024)])
    expect(res.status).toBe(413)
    expect(res.body.code).toBe('payload_too_large')
  })

  test('100 distinct licenses (well over 64 KiB) are taken in one request', async () => {
    const licenses: string[] = []
    for (let i = 0; i < 10; i++) licenses.push(...(await Promise.all(Array.from({ length: 10 }, () => issued()))).map((l) => l.license))
    expect(Buffer.byteLength(JSON.stringify({ licenses }))).toBeGreaterThan(64 * 1024)
    const res = await sync(licenses)
    expect(res.status).toBe(200)
    expect(res.body.results.map((r: any) => r.status)).toEqual(Array(100).fill('valid'))
  }, 60_000)

  test('scope: offline:write or full_access only', async () => {
    const lic = await issued()
    expect((await sync([lic.license], await scopedToken(h.call, acct.token, 'offline:write'))).status).toBe(200)
    for (const scope of ['validate', 'keys:write', 'keys:read', 'products:write']) {
      const res = await sync([lic.license], await scopedToken(h.call, acct.token, scope))
      expect(res.status).toBe(403)
      expect(res.body.code).toBe('insufficient_scope')
    }
    expect((await sync([lic.license], null as never)).status).toBe(401)
  })
})

import { beforeAll, describe, expect, test } from 'bun:test'
import { createPublicKey } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { envelopeOf, issueLicense, licenseText, offlineAccount, payloadOf, verifiesWith } from '../support/offline'

const h = useHarness() // one test validates: a real socket
let acct: { id: string; token: string }
let productId: string
let publicKeyPem: string
beforeAll(async () => {
  ;({ acct, productId, publicKeyPem } = await offlineAccount(h))
}, 60_000)

const issue = (keyId: string, body: unknown, token = acct.token, headers?: Record<string, string>) =>
  issueLicense(h.call, token, keyId, body, headers)

describe('public key', () => {
  test('any scope reads it; PEM and raw forms are the same key; stable', async () => {
    const token = await scopedToken(h.call, acct.token, 'validate')
    const res = await h.call('GET', '/v1/offline/public-key', { token })
    expect(res.status).toBe(200)
    expect(res.body.algorithm).toBe('ed25519')
    expect(res.body.kid).toMatch(/^[0-9a-f]{32}$/)
    expect(res.body.public_key_pem).toBe(publicKeyPem)
    const raw = Buffer.from(createPublicKey(publicKeyPem).export({ format: 'jwk' }).x!, 'base64url')
    expect(Buffer.from(res.body.public_key, 'base64')).toEqual(raw)
    expect(raw.length).toBe(32)
    const again = await h.call('GET', '/v1/offline/public-key', { token: acct.token })
    expect(again.body).toEqual(res.body)
  })

  test('no token is 401', async () => {
    const res = await h.call('GET', '/v1/offline/public-key')
    expect(res.status).toBe(401)
    expect(res.body.code).toBe('unauthorized')
  })

  test('created with the account; the private key is stored sealed', async () => {
    const rows = await h.node.deps.sql`select kid, private_key_sealed from signing_keys where account_id = ${acct.id}`
    expect(rows.length).toBe(1)
    expect(rows[0].private_key_sealed).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
    expect(rows[0].private_key_sealed).not.toContain('PRIVATE KEY')
  })

  test('an account without a key pair (created before offline licenses) gets one on first use', async () => {
    const other = await h.account()
    await h.node.deps.sql`delete from signing_keys where account_id = ${other.id}`
    const pk = await h.call('GET', '/v1/offline/public-key', { token: other.token })
    expect(pk.status).toBe(200)
    const key = await newKey(h.call, other.token, (await newProduct(h.call, other.token)).id)
    const lic = await issue(key.id, { device_fingerprint: fingerprint() }, other.token)
    expect(lic.status).toBe(201)
    expect(verifiesWith(pk.body.public_key_pem, lic.body.license)).toBe(true)
  })
})

describe('issuing', () => {
  test('201 with a license that verifies with Node crypto; the device takes a slot', async () => {
    const key = await newKey(h.call, acct.token, productId, { plan: 'pro' })
    const fp = fingerprint().toUpperCase()
    const token = await scopedToken(h.call, acct.token, 'offline:write')
    const res = await issue(key.id, { device_fingerprint: fp }, token)
    expect(res.status).toBe(201)
    const { id, license, expires_at, payload } = res.body
    expect(id).toMatch(/^lic_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(license.startsWith('-----BEGIN KEYWARD LICENSE-----\n')).toBe(true)
    expect(license.trimEnd().endsWith('\n-----END KEYWARD LICENSE-----')).toBe(true)
    // v2: the signer's kid inside the signed bytes; no signing key is active, so the root signs (same kid as the public key)
    expect(payload).toEqual({
      v: 2,
      id,
      account_id: acct.id,
      key_id: key.id,
      product_id: productId,
      plan: 'pro',
      device_fingerprint: fp.toLowerCase(),
      issued_at: payload.issued_at,
      expires_at,
      entitlements: {},
      kid: envelopeOf(license).kid,
      components: null,
      component_match: 'off',
    })
    expect(envelopeOf(license).certificate).toBeUndefined()
    expect(payloadOf(license)).toEqual(payload)
    expect(envelopeOf(license).alg).toBe('base64+ed25519')
    expect(Date.parse(expires_at) - Date.parse(payload.issued_at)).toBe(30 * 24 * 3600 * 1000)
    expect(verifiesWith(publicKeyPem, license)).toBe(true)

    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token: acct.token })
    expect(detail.body.activations_used).toBe(1)
    expect(detail.body.activations[0].device_fingerprint).toBe(fp.toLowerCase())
    expect(detail.body.activations[0].status).toBe('active')
  })

  test('one byte changed anywhere in the signed data fails verification', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const { license } = (await issue(key.id, { device_fingerprint: fingerprint() })).body
    const env = envelopeOf(license)
    const payload = Buffer.from(env.enc, 'base64')
    payload[payload.indexOf('"expires_at":"') + 15] ^= 1 // one year digit, one bit
    const forgedEnc = licenseText({ ...env, enc: payload.toString('base64') })
    expect(verifiesWith(publicKeyPem, forgedEnc)).toBe(false)
    const sig = Buffer.from(env.sig, 'base64')
    sig[10] ^= 0x80
    expect(verifiesWith(publicKeyPem, licenseText({ ...env, sig: sig.toString('base64') }))).toBe(false)
  })

  test('verifies with openssl pkeyutl against the published PEM; a changed byte does not', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const { license } = (await issue(key.id, { device_fingerprint: fingerprint() })).body
    const { enc, sig } = envelopeOf(license)
    const dir = mkdtempSync(join(tmpdir(), 'keyward-openssl-'))
    try {
      writeFileSync(join(dir, 'pub.pem'), publicKeyPem)
      writeFileSync(join(dir, 'msg'), `license/${enc}`)
      writeFileSync(join(dir, 'sig'), Buffer.from(sig, 'base64'))
      const tampered = Buffer.from(`license/${enc}`)
      tampered[20] ^= 1
      writeFileSync(join(dir, 'bad'), tampered)
      const run = (msg: string) =>
        Bun.spawnSync(['openssl', 'pkeyutl', '-verify', '-pubin', '-inkey', 'pub.pem', '-rawin', '-in', msg, '-sigfile', 'sig'], {
          cwd: dir,
        })
      const ok = run('msg')
      expect(ok.stdout.toString()).toContain('Signature Verified Successfully')
      expect(ok.exitCode).toBe(0)
      const bad = run('bad')
      expect(bad.exitCode).not.toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('another account\'s public key does not verify this account\'s license', async () => {
    const other = await h.account()
    const otherPem = (await h.call('GET', '/v1/offline/public-key', { token: other.token })).body.public_key_pem
    expect(otherPem).not.toBe(publicKeyPem)
    const key = await newKey(h.call, acct.token, productId)
    const { license } = (await issue(key.id, { device_fingerprint: fingerprint() })).body
    expect(verifiesWith(otherPem, license)).toBe(false)
    expect(verifiesWith(publicKeyPem, license)).toBe(true)
  })

  test('ttl_seconds, and never beyond the key\'s own expiry', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const short = (await issue(key.id, { device_fingerprint: fingerprint(), ttl_seconds: 3600 })).body
    expect(Date.parse(short.expires_at) - Date.parse(short.payload.issued_at)).toBe(3600 * 1000)
    const keyExpiry = new Date(Date.now() + 2 * 3600 * 1000).toISOString()
    const expiring = await newKey(h.call, acct.token, productId, { expires_at: keyExpiry })
    const capped = await issue(expiring.id, { device_fingerprint: fingerprint(), ttl_seconds: 31536000 })
    expect(capped.status).toBe(201)
    expect(capped.body.expires_at).toBe(keyExpiry)
  })

  test('the same device again reuses its slot; a new device beyond the limit is 409 activation_limit', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 1 })
    const fp = fingerprint()
    expect((await issue(key.id, { device_fingerprint: fp })).status).toBe(201)
    const again = await issue(key.id, { device_fingerprint: fp.toUpperCase() })
    expect(again.status).toBe(201)
    const full = await issue(key.id, { device_fingerprint: fingerprint() })
    expect(full.status).toBe(409)
    expect(full.body.code).toBe('activation_limit')
    expect(full.headers.get('content-type')).toContain('application/problem+json')
    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token: acct.token })
    expect(detail.body.activations_used).toBe(1)
    expect(detail.body.activations.length).toBe(1)
  })

  test('validate sees the offline device at once (same slots, warm caches included)', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 2 })
    const validate = (fp: string) =>
      h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: fp } })
    const online = fingerprint()
    expect((await validate(online)).body).toMatchObject({ valid: true, activations_used: 1 })
    const offline = fingerprint()
    expect((await issue(key.id, { device_fingerprint: offline })).status).toBe(201)
    expect((await validate(online)).body).toMatchObject({ valid: true, activations_used: 2 })
    expect((await validate(offline.toUpperCase())).body).toMatchObject({ valid: true, activations_used: 2 })
    expect((await validate(fingerprint())).body).toMatchObject({ valid: false, reason: 'activation_limit' })
  })

  test('revoked key is 409 key_revoked; expired key is 409 key_expired', async () => {
    const revoked = await newKey(h.call, acct.token, productId)
    expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token: acct.token, body: {} })).status).toBe(200)
    const r = await issue(revoked.id, { device_fingerprint: fingerprint() })
    expect(r.status).toBe(409)
    expect(r.body.code).toBe('key_revoked')

    const expired = await newKey(h.call, acct.token, productId, { expires_at: new Date(Date.now() + 3600e3).toISOString() })
    // past expires_at but not yet swept: the effective status is what counts
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 second' where id = ${expired.id}`
    const e = await issue(expired.id, { device_fingerprint: fingerprint() })
    expect(e.status).toBe(409)
    expect(e.body.code).toBe('key_expired')
    const detail = await h.call('GET', `/v1/keys/${expired.id}`, { token: acct.token })
    expect(detail.body.activations.length).toBe(0)
  })

  test('unknown, malformed and other-account key ids are 404', async () => {
    const other = await h.account()
    const foreign = await newKey(h.call, other.token, (await newProduct(h.call, other.token)).id)
    for (const id of ['nope', 'key_01JD7Z3X9K8Q4W2E6R5T1Y0U3A', foreign.id, `${foreign.id}x`]) {
      const res = await issue(id, { device_fingerprint: fingerprint() })
      expect(res.status).toBe(404)
      expect(res.body.code).toBe('not_found')
    }
  })

  test('bad bodies are 400 with field errors', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const bodies: unknown[] = [
      {},
      { device_fingerprint: 'a'.repeat(63) },
      { device_fingerprint: 'g'.repeat(64) },
      { device_fingerprint: 12 },
      { device_fingerprint: fingerprint(), ttl_seconds: 3599 },
      { device_fingerprint: fingerprint(), ttl_seconds: 31536001 },
      { device_fingerprint: fingerprint(), ttl_seconds: '3600' },
      { device_fingerprint: fingerprint(), ttl_seconds: 3600.5 },
      [],
    ]
    for (const body of bodies) {
      const res = await issue(key.id, body)
      expect(res.status).toBe(400)
      expect(res.body.code).toBe('invalid_request')
      expect(res.body.errors.length).toBeGreaterThan(0)
    }
    const raw = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, {
      token: acct.token,
      raw: '{"device_fingerprint":',
      headers: { 'content-type': 'application/json' },
    })
    expect(raw.status).toBe(400)
  })

  test('scope: offline:write or full_access only', async () => {
    const key = await newKey(h.call, acct.token, productId)
    for (const scope of ['validate', 'keys:write', 'keys:read', 'analytics:read']) {
      const token = await scopedToken(h.call, acct.token, scope)
      const res = await issue(key.id, { device_fingerprint: fingerprint() }, token)
      expect(res.status).toBe(403)
      expect(res.body.code).toBe('insufficient_scope')
    }
    expect((await issue(key.id, { device_fingerprint: fingerprint() }, 'kw_' + 'x'.repeat(32))).status).toBe(401)
  })

  test('Idempotency-Key replays the first answer and creates nothing more', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const body = { device_fingerprint: fingerprint() }
    const headers = { 'idempotency-key': `idem-${Math.random()}` }
    const first = await issue(key.id, body, acct.token, headers)
    expect(first.status).toBe(201)
    const second = await issue(key.id, body, acct.token, headers)
    expect(second.status).toBe(201)
    expect(second.headers.get('idempotent-replayed')).toBe('true')
    expect(second.body).toEqual(first.body)
    const [{ n }] = await h.node.deps.sql`select count(*)::int as n from offline_licenses where key_id = ${key.id}`
    expect(n).toBe(1)
    const reused = await issue(key.id, { device_fingerprint: fingerprint() }, acct.token, headers)
    expect(reused.status).toBe(409)
    expect(reused.body.code).toBe('idempotency_key_reused')
    // the same Idempotency-Key and body for another key is a different request, not a replay
    const otherKey = await newKey(h.call, acct.token, productId)
    const elsewhere = await issue(otherKey.id, body, acct.token, headers)
    expect(elsewhere.status).toBe(409)
    expect(elsewhere.body.code).toBe('idempotency_key_reused')
  })
})

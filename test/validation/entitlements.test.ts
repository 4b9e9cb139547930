// Entitlements and the terms after expiry on a key: the key object, validate's answer fields
// (entitlements, expired, grace_until), require_entitlements → entitlements_missing (request order,
// nothing recorded), grace and after_expiry keep, offline license payloads, and bad input.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { parseLicense } from '../../src/modules/offline/license'
import { fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

async function setup(extra: Record<string, unknown> = {}) {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, extra)
  return { accountId: id, token, key }
}

const validate = (token: string, body: Record<string, unknown>) => h.call('POST', '/v1/validate', { token, body })

/** Moves a key's expiry into the past behind the API's back, and drops this node's memory of it. */
async function expireAgo(keyId: string, ms: number) {
  await h.node.deps.sql`update license_keys set expires_at = ${new Date(Date.now() - ms)} where id = ${keyId}`
  h.node.deps.validation.hot.clear()
}

describe('entitlements on a key', () => {
  test('the key object and every valid answer carry them; none → {}', async () => {
    const { token, key } = await setup({ entitlements: { export: true, projects: 5, tier: 'pro', dropped: null } })
    expect(key).toMatchObject({ entitlements: { export: true, projects: 5, tier: 'pro' }, grace_seconds: 0, after_expiry: 'refuse' })
    const device = fingerprint()
    const first = await validate(token, { key: key.key_value, device_fingerprint: device })
    expect(first.body).toEqual({
      valid: true,
      plan: null,
      expires_at: null,
      activations_used: 1,
      activation_limit: 3,
      policy_id: null,
      entitlements: { export: true, projects: 5, tier: 'pro' },
      expired: false,
      grace_until: null,
      credits_remaining: null,
    })
    // the known device, from memory: the same fields
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toEqual(first.body)

    const plain = await newKey(h.call, token, key.product_id)
    expect((await validate(token, { key: plain.key_value, device_fingerprint: device })).body).toMatchObject({ valid: true, entitlements: {} })
  })

  test('require_entitlements: any code missing → entitlements_missing with the codes in request order, nothing recorded', async () => {
    const { accountId, token, key } = await setup({ entitlements: { export: true, projects: 5 } })
    const device = fingerprint()
    const refused = await validate(token, { key: key.key_value, device_fingerprint: device, require_entitlements: ['sso', 'export', 'audit.log'] })
    expect(refused.body).toEqual({ valid: false, reason: 'entitlements_missing', missing: ['sso', 'audit.log'] })
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.activations).toEqual([])
    expect(await eventsOf(h, accountId, 'activation.created')).toEqual([])

    const ok = await validate(token, { key: key.key_value, device_fingerprint: device, require_entitlements: ['projects', 'export'] })
    expect(ok.body).toMatchObject({ valid: true, activations_used: 1 })
    // a known device is refused the same way
    const again = await validate(token, { key: key.key_value, device_fingerprint: device, require_entitlements: ['sso'] })
    expect(again.body).toEqual({ valid: false, reason: 'entitlements_missing', missing: ['sso'] })
  })

  test('refusals before entitlements win: a revoked key is revoked whatever it lacks', async () => {
    const { token, key } = await setup()
    await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })
    expect((await validate(token, { key: key.key_value, device_fingerprint: fingerprint(), require_entitlements: ['x'] })).body.reason).toBe('revoked')
  })

  test('PATCH entitlements replaces the map, in force at once; an unchanged map emits nothing', async () => {
    const { accountId, token, key } = await setup({ entitlements: { export: true } })
    const device = fingerprint()
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body.entitlements).toEqual({ export: true })
    const patched = await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { entitlements: { sso: true, seats: 10 } } })
    expect(patched.body.entitlements).toEqual({ sso: true, seats: 10 })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body.entitlements).toEqual({ sso: true, seats: 10 })
    await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { entitlements: { sso: true, seats: 10 } } })
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(1)
  })

  test('bad entitlements and bad require_entitlements → 400, nothing changed', async () => {
    const { token, key } = await setup({ entitlements: { export: true } })
    const bad: unknown[] = [null, [], 'export', { Export: true }, { export: false }, { s: '' }, { s: 'x'.repeat(201) }, { o: {} },
      Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, true]))]
    const raws = [...bad.map((entitlements) => JSON.stringify({ entitlements })), '{"entitlements": {"n": 1e999}}'] // the last parses to Infinity
    for (const raw of raws) {
      const res = await h.call('PATCH', `/v1/keys/${key.id}`, { token, raw, headers: { 'content-type': 'application/json' } })
      expectProblem(res, 400, 'invalid_request')
    }
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.entitlements).toEqual({ export: true })
    expectProblem(await h.call('POST', '/v1/keys', { token, body: { product_id: key.product_id, entitlements: { 'a b': true } } }), 400, 'invalid_request')
    for (const require_entitlements of [[], ['Export'], Array.from({ length: 17 }, (_, i) => `c${i}`), 'export', [1]]) {
      expectProblem(await validate(token, { key: key.key_value, device_fingerprint: fingerprint(), require_entitlements }), 400, 'invalid_request')
    }
  })
})

describe('after expiry: grace and keep', () => {
  test('in grace: valid, marked expired, with grace_until; after the grace: expired', async () => {
    const { token, key } = await setup({ grace_seconds: 3600, expires_at: new Date(Date.now() + 86_400_000).toISOString() })
    const device = fingerprint()
    const before = await validate(token, { key: key.key_value, device_fingerprint: device })
    expect(before.body).toMatchObject({ valid: true, expired: false, grace_until: new Date(Date.parse(key.expires_at) + 3_600_000).toISOString() })

    await expireAgo(key.id, 60_000)
    const [{ expires_at }] = await h.node.deps.sql<{ expires_at: Date }[]>`select expires_at from license_keys where id = ${key.id}`
    const inGrace = await validate(token, { key: key.key_value, device_fingerprint: device })
    expect(inGrace.body).toMatchObject({ valid: true, expired: true, grace_until: new Date(expires_at.getTime() + 3_600_000).toISOString() })
    // a new device may still take a slot during the grace
    expect((await validate(token, { key: key.key_value, device_fingerprint: fingerprint() })).body).toMatchObject({ valid: true, expired: true })
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('expired')

    await expireAgo(key.id, 3_601_000)
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toEqual({ valid: false, reason: 'expired' })
    expect((await validate(token, { key: key.key_value, device_fingerprint: fingerprint() })).body).toEqual({ valid: false, reason: 'expired' })
  })

  test('after_expiry keep: valid forever after expiry, marked expired, no grace_until', async () => {
    const { token, key } = await setup({ after_expiry: 'keep', grace_seconds: 60 })
    await expireAgo(key.id, 400 * 86_400_000)
    const res = await validate(token, { key: key.key_value, device_fingerprint: fingerprint() })
    expect(res.body).toMatchObject({ valid: true, expired: true, grace_until: null })
  })

  test('PATCH grace_seconds / after_expiry: null goes back to the default', async () => {
    const { token, key } = await setup({ after_expiry: 'keep', grace_seconds: 60 })
    const res = await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { after_expiry: null, grace_seconds: null } })
    expect(res.body).toMatchObject({ after_expiry: 'refuse', grace_seconds: 0 })
    for (const body of [{ grace_seconds: -1 }, { grace_seconds: 31536001 }, { grace_seconds: 1.5 }, { after_expiry: 'forever' }]) {
      expectProblem(await h.call('PATCH', `/v1/keys/${key.id}`, { token, body }), 400, 'invalid_request')
    }
  })
})

describe('offline licenses', () => {
  test("the payload carries the key's entitlements; in grace the license ends with the grace; sync refuses past it", async () => {
    const { token, key } = await setup({ entitlements: { export: true, projects: 3 }, grace_seconds: 7200 })
    await expireAgo(key.id, 60_000)
    const issued = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint() } })
    expect(issued.status).toBe(201)
    expect(issued.body.payload.entitlements).toEqual({ export: true, projects: 3 })
    expect((parseLicense(issued.body.license)!.payload as { entitlements: unknown }).entitlements).toEqual({ export: true, projects: 3 })
    const [{ expires_at }] = await h.node.deps.sql<{ expires_at: Date }[]>`select expires_at from license_keys where id = ${key.id}`
    expect(issued.body.expires_at).toBe(new Date(expires_at.getTime() + 7_200_000).toISOString())

    await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { entitlements: { export: true } } })
    const renewed = await h.call('POST', '/v1/offline-licenses/sync', { token, body: { licenses: [issued.body.license] } })
    expect(renewed.body.results[0].status).toBe('valid')
    expect((parseLicense(renewed.body.results[0].license)!.payload as { entitlements: unknown }).entitlements).toEqual({ export: true })

    await expireAgo(key.id, 7_300_000)
    const late = await h.call('POST', '/v1/offline-licenses/sync', { token, body: { licenses: [issued.body.license] } })
    expect(late.body.results[0].status).toBe('expired')
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint() } }), 409, 'key_expired')
  })
})

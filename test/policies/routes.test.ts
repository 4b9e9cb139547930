// Policies over the app: CRUD with every field and its range, events (policy.updated only when a
// value changed), policy_in_use, bad input (nothing changed), and keys that reference a policy:
// product and expiry from the policy, effective values, overrides, reset, ?policy_id, and a policy
// edit in force at once for the key object and validate.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { addPeriod, parsePeriod, type Period } from '../../src/core/durations'
import { fingerprint, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ghostId, ID, ISO_MS } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

async function setup() {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  return { accountId: id, token, product }
}

async function newPolicy(token: string, productId: string, extra: Record<string, unknown> = {}) {
  const res = await h.call('POST', '/v1/policies', { token, body: { product_id: productId, name: 'Pro, yearly', ...extra } })
  if (res.status !== 201) throw new Error(`policy creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

const validate = (token: string, key: string, device: string, extra: Record<string, unknown> = {}) =>
  h.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device, ...extra } })

describe('policies', () => {
  test('POST → 201 with defaults; GET; list per product, oldest first; policy.created', async () => {
    const { accountId, token, product } = await setup()
    const res = await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Trial' } })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(ID('pol')),
      product_id: product.id,
      name: 'Trial',
      plan: null,
      activation_limit: 3,
      duration: null,
      expiry_basis: 'creation',
      one_key_per_device: false,
      grace_seconds: 0,
      after_expiry: 'refuse',
      release_after_seconds: null,
      deactivations_allowed: null,
      entitlements: {},
      component_match: 'off',
      credits: null,
      metadata: {},
      keys: 0,
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
    })
    expect((await eventsOf(h, accountId, 'policy.created')).map((e) => e.data)).toEqual([res.body])
    expect((await h.call('GET', `/v1/policies/${res.body.id}`, { token })).body).toEqual(res.body)
    const second = await newPolicy(token, product.id)
    const other = await newPolicy(token, (await newProduct(h.call, token)).id)
    const listed = await h.call('GET', `/v1/policies?product_id=${product.id}`, { token })
    expect(listed.body.data.map((p: { id: string }) => p.id)).toEqual([res.body.id, second.id])
    expect((await h.call('GET', '/v1/policies', { token })).body.data.map((p: { id: string }) => p.id)).toEqual([res.body.id, second.id, other.id])
  })

  test('every field, at its bounds', async () => {
    const { token, product } = await setup()
    const body = {
      product_id: product.id,
      name: 'n'.repeat(200),
      plan: 'p'.repeat(64),
      activation_limit: 10000,
      duration: 'P100Y',
      expiry_basis: 'first_activation',
      one_key_per_device: true,
      grace_seconds: 31536000,
      after_expiry: 'keep',
      release_after_seconds: 60,
      deactivations_allowed: 0,
      entitlements: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`c${i}`, i % 2 ? true : i])),
      metadata: { tier: 'gold' },
    }
    const res = await h.call('POST', '/v1/policies', { token, body })
    expect(res.status).toBe(201)
    const { product_id: _, ...rest } = body
    expect(res.body).toMatchObject(rest)
  })

  test('PATCH: omitted fields stay; policy.updated only when a value changed; product_id immutable', async () => {
    const { accountId, token, product } = await setup()
    const policy = await newPolicy(token, product.id, { entitlements: { export: true } })
    const same = await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { name: policy.name, product_id: product.id, entitlements: { export: true } } })
    expect(same.status).toBe(200)
    expect(same.body).toEqual(policy)
    const changed = await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { plan: 'pro', duration: 'P1Y6M', entitlements: { sso: true } } })
    expect(changed.body).toMatchObject({ name: 'Pro, yearly', plan: 'pro', duration: 'P1Y6M', entitlements: { sso: true } })
    expect((await eventsOf(h, accountId, 'policy.updated')).map((e) => e.data)).toEqual([changed.body])
    const other = await newProduct(h.call, token)
    expectProblem(await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { product_id: other.id } }), 400, 'invalid_request')
  })

  test('DELETE → 204 and policy.deleted; 409 policy_in_use while a key references it', async () => {
    const { accountId, token, product } = await setup()
    const policy = await newPolicy(token, product.id)
    const key = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
    expectProblem(await h.call('DELETE', `/v1/policies/${policy.id}`, { token }), 409, 'policy_in_use')
    expect((await h.call('GET', `/v1/policies/${policy.id}`, { token })).body.keys).toBe(1)
    await h.node.deps.sql`delete from license_keys where id = ${key.id}`
    expect((await h.call('DELETE', `/v1/policies/${policy.id}`, { token })).status).toBe(204)
    expect((await eventsOf(h, accountId, 'policy.deleted')).map((e) => e.data.id)).toEqual([policy.id])
    expectProblem(await h.call('GET', `/v1/policies/${policy.id}`, { token }), 404, 'not_found')
  })

  test('bad input → 400 (or 404 for an unknown or foreign product or policy), nothing written', async () => {
    const { accountId, token, product } = await setup()
    const bad: Record<string, unknown>[] = [
      { name: '' },
      { name: 'n'.repeat(201) },
      { plan: 'p'.repeat(65) },
      { activation_limit: 0 },
      { activation_limit: 10001 },
      { duration: 'P1' },
      { duration: 'PT0M' },
      { duration: 'P101Y' },
      { duration: 'PT30S' },
      { expiry_basis: 'first_launch' },
      { one_key_per_device: 'yes' },
      { grace_seconds: -1 },
      { grace_seconds: 31536001 },
      { after_expiry: 'never' },
      { release_after_seconds: 59 },
      { deactivations_allowed: -1 },
      { entitlements: { export: null } },
      { entitlements: { 'Bad Code': true } },
      { entitlements: [] },
      { metadata: { big: 'x'.repeat(9000) } },
      { metadata: null },
    ]
    for (const extra of bad) {
      expectProblem(await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'x', ...extra } }), 400, 'invalid_request')
    }
    expectProblem(await h.call('POST', '/v1/policies', { token, body: { name: 'x' } }), 400, 'invalid_request')
    expectProblem(await h.call('POST', '/v1/policies', { token, body: { product_id: ghostId('prod'), name: 'x' } }), 404, 'not_found')
    const foreign = await h.account()
    const foreignProduct = await newProduct(h.call, foreign.token)
    const foreignPolicy = await newPolicy(foreign.token, foreignProduct.id)
    expectProblem(await h.call('POST', '/v1/policies', { token, body: { product_id: foreignProduct.id, name: 'x' } }), 404, 'not_found')
    expect((await h.call('GET', '/v1/policies', { token })).body.data).toEqual([])
    expect(await eventsOf(h, accountId, 'policy.created')).toEqual([])

    const policy = await newPolicy(token, product.id)
    for (const extra of bad) {
      expectProblem(await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: extra }), 400, 'invalid_request')
    }
    expect((await h.call('GET', `/v1/policies/${policy.id}`, { token })).body).toEqual(policy)
    for (const [method, body] of [['GET'], ['PATCH', { name: 'mine' }], ['DELETE']] as const) {
      expectProblem(await h.call(method, `/v1/policies/${foreignPolicy.id}`, { token, body }), 404, 'not_found')
    }
    expectProblem(await h.call('GET', '/v1/policies/nope', { token }), 404, 'not_found')
    expect((await h.call('GET', `/v1/policies/${foreignPolicy.id}`, { token: foreign.token })).body).toEqual(foreignPolicy)
  })
})

describe('keys with a policy', () => {
  test('product and expiry from the policy; effective values; overrides {}; an explicit expires_at wins', async () => {
    const { token, product } = await setup()
    const policy = await newPolicy(token, product.id, {
      plan: 'pro',
      activation_limit: 5,
      duration: 'P1M',
      grace_seconds: 3600,
      after_expiry: 'refuse',
      release_after_seconds: 86400,
      deactivations_allowed: 2,
      entitlements: { export: true, projects: 5 },
    })
    const res = await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })
    expect(res.status).toBe(201)
    const key = res.body
    expect(key).toMatchObject({
      product_id: product.id,
      policy_id: policy.id,
      expiry_pending: false,
      plan: 'pro',
      activation_limit: 5,
      grace_seconds: 3600,
      after_expiry: 'refuse',
      release_after_seconds: 86400,
      deactivations_allowed: 2,
      entitlements: { export: true, projects: 5 },
      overrides: {},
    })
    const month = parsePeriod('P1M') as Period
    expect(key.expires_at).toBe(new Date(addPeriod(Date.parse(key.created_at), month)).toISOString())
    const explicit = new Date(Date.now() + 5 * 86_400_000).toISOString()
    const withExpiry = await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id, product_id: product.id, expires_at: explicit } })
    expect(withExpiry.body.expires_at).toBe(explicit)

    const answer = await validate(token, key.key_value, fingerprint())
    expect(answer.body).toMatchObject({
      valid: true,
      plan: 'pro',
      activation_limit: 5,
      policy_id: policy.id,
      entitlements: { export: true, projects: 5 },
      expired: false,
      grace_until: new Date(Date.parse(key.expires_at) + 3_600_000).toISOString(),
    })
    const listed = await h.call('GET', `/v1/keys?policy_id=${policy.id}`, { token })
    expect(listed.body.data.map((k: { id: string }) => k.id).sort()).toEqual([key.id, withExpiry.body.id].sort())
    expect((await h.call('GET', '/v1/keys?plan=pro', { token })).body.total).toBe(2)
  })

  test("the key's own values override and show in overrides; entitlements merge (null removes); reset drops them", async () => {
    const { token, product } = await setup()
    const policy = await newPolicy(token, product.id, { plan: 'pro', activation_limit: 5, entitlements: { export: true, projects: 5 } })
    const created = await h.call('POST', '/v1/keys', {
      token,
      body: { policy_id: policy.id, activation_limit: 1, plan: null, entitlements: { projects: 50, export: null, sso: true } },
    })
    const key = created.body
    expect(key).toMatchObject({
      plan: null,
      activation_limit: 1,
      entitlements: { projects: 50, sso: true },
      overrides: { plan: null, activation_limit: 1, entitlements: { projects: 50, export: null, sso: true } },
    })
    const device = fingerprint()
    expect((await validate(token, key.key_value, device, { require_entitlements: ['export'] })).body).toEqual({
      valid: false,
      reason: 'entitlements_missing',
      missing: ['export'],
    })
    expect((await validate(token, key.key_value, device)).body).toMatchObject({ valid: true, plan: null, activation_limit: 1 })
    expect((await validate(token, key.key_value, fingerprint())).body.reason).toBe('activation_limit')

    const patched = await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { grace_seconds: 60, reset: ['activation_limit', 'entitlements'] } })
    expect(patched.body).toMatchObject({
      activation_limit: 5,
      grace_seconds: 60,
      entitlements: { export: true, projects: 5 },
      overrides: { plan: null, grace_seconds: 60 },
    })
    // in force at once: a second device now has a slot
    expect((await validate(token, key.key_value, fingerprint())).body).toMatchObject({ valid: true, activation_limit: 5 })
    const back = await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { reset: ['plan', 'grace_seconds'] } })
    expect(back.body).toMatchObject({ plan: 'pro', grace_seconds: 0, overrides: {} })
    expectProblem(await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { plan: 'x', reset: ['plan'] } }), 400, 'invalid_request')
    expectProblem(await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { reset: ['metadata'] } }), 400, 'invalid_request')
  })

  test('a policy edit is in force at once for the key object and validate; duration moves no computed expiry', async () => {
    const { token, product } = await setup()
    const policy = await newPolicy(token, product.id, { activation_limit: 1, duration: 'P1Y', entitlements: { export: true } })
    const key = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
    const own = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id, activation_limit: 1 } })).body
    const device = fingerprint()
    expect((await validate(token, key.key_value, device)).body).toMatchObject({ valid: true, activation_limit: 1, entitlements: { export: true } })
    expect((await validate(token, key.key_value, fingerprint())).body.reason).toBe('activation_limit')
    expect((await validate(token, own.key_value, device)).body.valid).toBe(true)

    await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { activation_limit: 2, entitlements: { sso: true }, duration: 'P1M', plan: 'gold' } })
    expect((await validate(token, key.key_value, device)).body).toMatchObject({ valid: true, plan: 'gold', activation_limit: 2, entitlements: { sso: true } })
    expect((await validate(token, key.key_value, fingerprint())).body).toMatchObject({ valid: true, activations_used: 2 })
    expect((await validate(token, own.key_value, fingerprint())).body.reason).toBe('activation_limit') // its own limit stays
    const shown = (await h.call('GET', `/v1/keys/${key.id}`, { token })).body
    expect(shown).toMatchObject({ plan: 'gold', activation_limit: 2, entitlements: { sso: true }, expires_at: key.expires_at })
    expect((await h.call('GET', `/v1/policies/${policy.id}`, { token })).body.keys).toBe(2)
  })

  test("bad references: unknown or another account's policy 404, product mismatch 400, nothing created", async () => {
    const { token, product } = await setup()
    const policy = await newPolicy(token, product.id)
    const other = await newProduct(h.call, token)
    expectProblem(await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id, product_id: other.id } }), 400, 'invalid_request')
    expectProblem(await h.call('POST', '/v1/keys', { token, body: { policy_id: ghostId('pol') } }), 404, 'not_found')
    expectProblem(await h.call('POST', '/v1/keys', { token, body: { policy_id: 'pol_nope' } }), 404, 'not_found')
    expectProblem(await h.call('POST', '/v1/keys', { token, body: {} }), 400, 'invalid_request')
    const foreign = await h.account()
    const foreignPolicy = await newPolicy(foreign.token, (await newProduct(h.call, foreign.token)).id)
    expectProblem(await h.call('POST', '/v1/keys', { token, body: { policy_id: foreignPolicy.id } }), 404, 'not_found')
    expect((await h.call('GET', '/v1/keys', { token })).body.total).toBe(0)
  })
})

describe('trials: expiry from the first activation, one key per device', () => {
  test('expiry_basis first_activation: expires_at null and expiry_pending until the first device, which sets it once', async () => {
    const { accountId, token, product } = await setup()
    const policy = await newPolicy(token, product.id, { duration: 'P14D', expiry_basis: 'first_activation' })
    expect(policy).toMatchObject({ expiry_basis: 'first_activation', one_key_per_device: false })
    const key = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
    expect(key).toMatchObject({ expires_at: null, expiry_pending: true })
    const device = fingerprint()
    const first = await validate(token, key.key_value, device)
    const [activation] = await h.node.deps.sql<{ activated_at: Date }[]>`select activated_at from activations where key_id = ${key.id}`
    const expected = new Date(addPeriod(activation!.activated_at.getTime(), parsePeriod('P14D') as Period)).toISOString()
    expect(first.body).toMatchObject({ valid: true, expires_at: expected })
    expect((await validate(token, key.key_value, device)).body.expires_at).toBe(expected) // from memory
    expect((await validate(token, key.key_value, fingerprint())).body.expires_at).toBe(expected) // a second device moves nothing
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body).toMatchObject({ expires_at: expected, expiry_pending: false })
    // a later edit of the policy moves no key
    await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { duration: 'P1D' } })
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.expires_at).toBe(expected)
    expect(await eventsOf(h, accountId, 'activation.created')).toHaveLength(2)
  })

  test('first_activation through an offline license; an explicit expires_at or extend ends the pending expiry', async () => {
    const { token, product } = await setup()
    const policy = await newPolicy(token, product.id, { duration: 'P1M', expiry_basis: 'first_activation' })
    const key = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
    const issued = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint() } })
    expect(issued.status).toBe(201)
    const shown = (await h.call('GET', `/v1/keys/${key.id}`, { token })).body
    expect(shown.expiry_pending).toBe(false)
    expect(shown.expires_at).toBe(issued.body.expires_at) // the license ends with the key's new term (ttl 30 days > term)
    const explicit = new Date(Date.now() + 3 * 86_400_000).toISOString()
    expect((await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id, expires_at: explicit } })).body).toMatchObject({
      expires_at: explicit,
      expiry_pending: false,
    })
    const pending = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
    const extended = await h.call('POST', `/v1/keys/${pending.id}/extend`, { token, body: { expires_at: explicit } })
    expect(extended.body).toMatchObject({ expires_at: explicit, expiry_pending: false })
    expect((await validate(token, pending.key_value, fingerprint())).body.expires_at).toBe(explicit)
  })

  test('one_key_per_device: a device that held a key of the policy is refused every other key of it, before the limit', async () => {
    const { token, product } = await setup()
    const policy = await newPolicy(token, product.id, { one_key_per_device: true, activation_limit: 1 })
    const [a, b] = [
      (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body,
      (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body,
    ]
    const device = fingerprint()
    expect((await validate(token, a.key_value, device)).body.valid).toBe(true)
    expect((await validate(token, b.key_value, device)).body).toEqual({ valid: false, reason: 'device_already_used' })
    // even when the key is full, and after the device released its first key
    expect((await validate(token, b.key_value, fingerprint())).body.valid).toBe(true)
    expect((await validate(token, b.key_value, device)).body.reason).toBe('device_already_used')
    await h.call('POST', '/v1/deactivate', { token, body: { key: a.key_value, device_fingerprint: device } })
    expect((await validate(token, b.key_value, device)).body.reason).toBe('device_already_used')
    // its own key takes it back
    expect((await validate(token, a.key_value, device)).body.valid).toBe(true)
    expectProblem(await h.call('POST', `/v1/keys/${b.id}/offline-licenses`, { token, body: { device_fingerprint: device } }), 409, 'device_already_used')
    // another policy of the product is another trial; a refused device is not recorded
    const other = await newPolicy(token, product.id, { one_key_per_device: true })
    const c = (await h.call('POST', '/v1/keys', { token, body: { policy_id: other.id } })).body
    expect((await validate(token, c.key_value, device)).body.valid).toBe(true)
    const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from policy_devices where device_fingerprint = ${device}`
    expect(n).toBe(2)
  })
})

test('deleting a product deletes its policies (and the keys it may delete), with the devices they remember', async () => {
  const { token, product } = await setup()
  const policy = await newPolicy(token, product.id, { one_key_per_device: true })
  const key = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
  expect((await validate(token, key.key_value, fingerprint())).body.valid).toBe(true)
  expectProblem(await h.call('DELETE', `/v1/products/${product.id}`, { token }), 422, 'product_has_active_keys')
  await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })
  expect((await h.call('DELETE', `/v1/products/${product.id}`, { token })).status).toBe(204)
  expectProblem(await h.call('GET', `/v1/policies/${policy.id}`, { token }), 404, 'not_found')
  const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from policy_devices where policy_id = ${policy.id}`
  expect(n).toBe(0)
})

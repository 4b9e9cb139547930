// What a key inherits, declared once (core/key-settings.ts): the SQL merge that policies/repo.ts
// generates from the table answers what `effective(own, policy)` computes, for keys without a
// policy, with one and nothing of their own, and with every setting of their own; the key object's
// `overrides` names exactly what the key sets itself. A row added to the table without its SQL rule
// (or a rule changed on one side only) fails here.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { effective, KEY_SETTINGS, overridesOf, SETTING_DEFAULTS, type OwnSettings, type PolicyValues } from '../../src/core/key-settings'
import { effectiveSettings, joinPolicy } from '../../src/modules/policies/repo'
import { newProduct, useHarness } from '../support/harness'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

const POLICY = {
  plan: 'team',
  activation_limit: 7,
  release_after_seconds: 3600,
  deactivations_allowed: 2,
  grace_seconds: 86400,
  after_expiry: 'keep',
  entitlements: { export: true, seats: 5, tier: 'gold' },
  one_key_per_device: true,
  component_match: 'most',
} as const satisfies PolicyValues

const OWN_ALL = {
  plan: 'solo',
  activation_limit: 1,
  release_after_seconds: 120,
  deactivations_allowed: 0,
  grace_seconds: 0,
  after_expiry: 'refuse',
  entitlements: { seats: 9, beta: true },
  component_match: 'two',
} as const

async function sqlMerge(keyId: string) {
  const sql = h.node.deps.sql
  const [row] = await sql`select ${effectiveSettings(sql)} from license_keys k ${joinPolicy(sql)} where k.id = ${keyId}`
  return row as Record<string, unknown>
}

async function ownOf(keyId: string): Promise<OwnSettings> {
  const [row] = await h.node.deps.sql<OwnSettings[]>`select own_fields, plan, activation_limit, release_after_seconds, deactivations_allowed,
      grace_seconds, after_expiry, entitlements, component_match from license_keys where id = ${keyId}`
  return row!
}

describe('key settings: the table, effective() and the SQL agree', () => {
  test('every row of the table has a column of its name on keys (but the policy-only one) and on policies', async () => {
    const sql = h.node.deps.sql
    const columns = async (table: string) =>
      (await sql<{ column_name: string }[]>`select column_name from information_schema.columns where table_name = ${table}`).map((r) => r.column_name)
    const keys = await columns('license_keys')
    const policies = await columns('policies')
    for (const s of KEY_SETTINGS) {
      expect(policies).toContain(s.column)
      if (s.inherit !== 'policy') expect(keys).toContain(s.column)
    }
    expect(SETTING_DEFAULTS.activation_limit).toBe(3)
  })

  test('keys without a policy, with one, with overrides and with a removed entitlement', async () => {
    const { token } = await h.account()
    const product = await newProduct(h.call, token)
    const pol = await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Team', ...POLICY } })
    expect(pol.status).toBe(201)
    const cases: { name: string; body: Record<string, unknown>; policy: PolicyValues | null }[] = [
      { name: 'no policy, nothing set', body: { product_id: product.id }, policy: null },
      { name: 'no policy, everything set', body: { product_id: product.id, ...OWN_ALL }, policy: null },
      { name: 'policy, nothing set', body: { policy_id: pol.body.id }, policy: POLICY },
      { name: 'policy, everything set', body: { policy_id: pol.body.id, ...OWN_ALL }, policy: POLICY },
      { name: 'policy, some set, a code removed', body: { policy_id: pol.body.id, plan: null, grace_seconds: 60, entitlements: { tier: null, new: 'x' } }, policy: POLICY },
    ]
    for (const c of cases) {
      const res = await h.call('POST', '/v1/keys', { token, body: c.body })
      expect(res.status, c.name).toBe(201)
      const own = await ownOf(res.body.id)
      const want = effective(own, c.policy)
      expect(await sqlMerge(res.body.id), c.name).toEqual(want as unknown as Record<string, unknown>)
      // the key object shows the same values (one_key_per_device is the policy's, not on the key object)
      const { one_key_per_device: _, ...shown } = want
      for (const [field, value] of Object.entries(shown)) expect(res.body[field], `${c.name}: ${field}`).toEqual(value)
      expect(res.body.overrides, c.name).toEqual(overridesOf(own, c.policy !== null))
    }
  })

  test('a PATCH reset goes back to the policy in both', async () => {
    const { token } = await h.account()
    const product = await newProduct(h.call, token)
    const pol = await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Team', ...POLICY } })
    const key = await h.call('POST', '/v1/keys', { token, body: { policy_id: pol.body.id, ...OWN_ALL } })
    const reset = await h.call('PATCH', `/v1/keys/${key.body.id}`, { token, body: { reset: ['activation_limit', 'grace_seconds', 'entitlements', 'component_match'] } })
    expect(reset.status).toBe(200)
    const own = await ownOf(key.body.id)
    expect(own.own_fields).toEqual(['deactivations_allowed', 'plan', 'release_after_seconds'])
    const want = effective(own, POLICY)
    expect(want.activation_limit).toBe(POLICY.activation_limit)
    expect(want.grace_seconds).toBe(POLICY.grace_seconds)
    expect(want.entitlements).toEqual(POLICY.entitlements)
    expect(want.component_match).toBe(POLICY.component_match)
    expect(await sqlMerge(key.body.id)).toEqual(want as unknown as Record<string, unknown>)
    expect(reset.body.overrides).toEqual(overridesOf(own, true))
  })
})

// The pure transitions of a key (src/modules/keys/lifecycle.ts): for each change, what is written and
// emitted, when nothing changes, and when it is refused. No database: the rules alone, the ones the
// API, the payment connectors and the reinstate sweeper share through changeKey.
import { describe, expect, test } from 'bun:test'
import { transition, type Change, type KeyNow } from '../../src/modules/keys/lifecycle'
import type { Key } from '../../src/modules/keys/model'
import type { KeySettings } from '../../src/modules/keys/repo'

const T0 = '2030-01-01T00:00:00.000Z'

function key(over: Partial<Key> = {}): Key {
  return {
    id: 'key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I',
    product_id: 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I',
    plan: null,
    status: 'active',
    activation_limit: 3,
    activations_used: 0,
    expires_at: null,
    created_at: T0,
    revoked_at: null,
    revoke_reason: null,
    suspended_at: null,
    suspend_reason: null,
    suspended_until: null,
    metadata: {},
    key_prefix: 'ABCDE',
    release_after_seconds: null,
    deactivations_allowed: null,
    deactivations_used: 0,
    entitlements: {},
    grace_seconds: 0,
    after_expiry: 'refuse',
    component_match: 'off',
    policy_id: null,
    expiry_pending: false,
    external_id: null,
    overrides: {},
    credits: null,
    customer: null,
    ...over,
  }
}

const revokedKey = () => key({ status: 'revoked', revoked_at: T0, revoke_reason: 'fraud' })
const suspended = (reason: string | null, until: string | null = null) =>
  key({ status: 'suspended', suspended_at: T0, suspend_reason: reason, suspended_until: until })
const on = (k: Key, change: Change, own?: KeyNow['own']) => transition({ key: k, own }, change)
const REFUSED = { refused: { code: 'key_revoked' as const, message: 'Key key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I is revoked; revoking is final' } }
const SAME = { same: true as const }

describe('revoke', () => {
  test('an active, expired or suspended key is revoked with key.revoked', () => {
    for (const k of [key(), key({ status: 'expired' }), suspended('disputed')]) {
      expect(on(k, { kind: 'revoke', reason: 'refunded' })).toEqual({ write: { kind: 'revoke', reason: 'refunded' }, event: 'key.revoked' })
    }
  })
  test('a revoked key: nothing (idempotent, no event)', () => {
    expect(on(revokedKey(), { kind: 'revoke', reason: 'again' })).toEqual(SAME)
  })
})

describe('extend, renew, end', () => {
  const at = new Date('2031-06-01T00:00:00.000Z')
  test('extend writes even an equal expiry, and null (perpetual); a revoked key is refused', () => {
    expect(on(key({ expires_at: at.toISOString() }), { kind: 'extend', expiresAt: at })).toEqual({ write: { kind: 'expiry', expiresAt: at }, event: 'key.extended' })
    expect(on(key(), { kind: 'extend', expiresAt: null })).toEqual({ write: { kind: 'expiry', expiresAt: null }, event: 'key.extended' })
    expect(on(revokedKey(), { kind: 'extend', expiresAt: at })).toEqual(REFUSED)
  })
  test('renew writes only a different expiry; a revoked key is refused', () => {
    expect(on(key({ expires_at: at.toISOString() }), { kind: 'renew', expiresAt: at })).toEqual(SAME)
    expect(on(key({ expires_at: T0 }), { kind: 'renew', expiresAt: at })).toEqual({ write: { kind: 'expiry', expiresAt: at }, event: 'key.extended' })
    expect(on(revokedKey(), { kind: 'renew', expiresAt: at })).toEqual(REFUSED)
  })
  test('end only brings an expiry forward (or sets one on a perpetual key)', () => {
    expect(on(key({ expires_at: T0 }), { kind: 'end', at })).toEqual(SAME)
    expect(on(key({ expires_at: at.toISOString() }), { kind: 'end', at })).toEqual(SAME)
    expect(on(key({ expires_at: '2032-01-01T00:00:00.000Z' }), { kind: 'end', at })).toEqual({ write: { kind: 'expiry', expiresAt: at }, event: 'key.extended' })
    expect(on(key(), { kind: 'end', at })).toEqual({ write: { kind: 'expiry', expiresAt: at }, event: 'key.extended' })
    expect(on(revokedKey(), { kind: 'end', at })).toEqual(REFUSED)
  })
})

describe('suspend (API) and hold (payment provider)', () => {
  const until = new Date('2031-01-01T00:00:00.000Z')
  test('suspend states the suspension whole: the same reason and until change nothing, another replaces it', () => {
    expect(on(key(), { kind: 'suspend', reason: 'audit', until })).toEqual({ write: { kind: 'suspend', reason: 'audit', until }, event: 'key.suspended' })
    expect(on(suspended('audit', until.toISOString()), { kind: 'suspend', reason: 'audit', until })).toEqual(SAME)
    expect(on(suspended('audit', until.toISOString()), { kind: 'suspend', reason: 'audit', until: null })).toEqual({
      write: { kind: 'suspend', reason: 'audit', until: null },
      event: 'key.suspended',
    })
    expect(on(suspended('disputed'), { kind: 'suspend', reason: null, until: null })).toEqual({ write: { kind: 'suspend', reason: null, until: null }, event: 'key.suspended' })
    expect(on(revokedKey(), { kind: 'suspend', reason: null, until: null })).toEqual(REFUSED)
  })
  test('hold: a dispute outranks a pause; a pause gives way to a dispute', () => {
    expect(on(key(), { kind: 'hold', reason: 'subscription_paused' })).toEqual({ write: { kind: 'suspend', reason: 'subscription_paused', until: null }, event: 'key.suspended' })
    expect(on(suspended('disputed'), { kind: 'hold', reason: 'subscription_paused' })).toEqual(SAME)
    expect(on(suspended('subscription_paused'), { kind: 'hold', reason: 'subscription_paused' })).toEqual(SAME)
    expect(on(suspended('subscription_paused'), { kind: 'hold', reason: 'disputed' })).toEqual({ write: { kind: 'suspend', reason: 'disputed', until: null }, event: 'key.suspended' })
    expect(on(suspended('audit'), { kind: 'hold', reason: 'disputed' })).toEqual({ write: { kind: 'suspend', reason: 'disputed', until: null }, event: 'key.suspended' })
    expect(on(revokedKey(), { kind: 'hold', reason: 'disputed' })).toEqual(REFUSED)
  })
})

describe('reinstate', () => {
  const reinstated = { write: { kind: 'reinstate' as const }, event: 'key.reinstated' as const }
  test('the API ends any suspension; a key not suspended (revoked too) is answered as is', () => {
    expect(on(suspended('audit'), { kind: 'reinstate' })).toEqual(reinstated)
    expect(on(key(), { kind: 'reinstate' })).toEqual(SAME)
    expect(on(revokedKey(), { kind: 'reinstate' })).toEqual(SAME)
  })
  test('a provider ends only the suspension of its reason, and never brings back a revoked key', () => {
    expect(on(suspended('disputed'), { kind: 'reinstate', reason: 'disputed' })).toEqual(reinstated)
    expect(on(suspended('disputed'), { kind: 'reinstate', reason: 'subscription_paused' })).toEqual(SAME)
    expect(on(key(), { kind: 'reinstate', reason: 'disputed' })).toEqual(SAME)
    expect(on(revokedKey(), { kind: 'reinstate', reason: 'disputed' })).toEqual(REFUSED)
  })
  test('the sweeper ends only a suspension due by its clock', () => {
    const at = new Date('2031-01-01T00:00:00.000Z')
    expect(on(suspended('x', '2030-12-31T23:59:59.000Z'), { kind: 'reinstate', dueAt: at })).toEqual(reinstated)
    expect(on(suspended('x', at.toISOString()), { kind: 'reinstate', dueAt: at })).toEqual(reinstated)
    expect(on(suspended('x', '2031-01-01T00:00:00.001Z'), { kind: 'reinstate', dueAt: at })).toEqual(SAME)
    expect(on(suspended('x', null), { kind: 'reinstate', dueAt: at })).toEqual(SAME)
    expect(on(key(), { kind: 'reinstate', dueAt: at })).toEqual(SAME)
  })
})

describe('reissue', () => {
  test('a new hash and prefix with key.reissued; a revoked key is refused', () => {
    expect(on(suspended('audit'), { kind: 'reissue', keyHash: 'ab', keyPrefix: 'XYZ12' })).toEqual({
      write: { kind: 'reissue', keyHash: 'ab', keyPrefix: 'XYZ12' },
      event: 'key.reissued',
    })
    expect(on(revokedKey(), { kind: 'reissue', keyHash: 'ab', keyPrefix: 'XYZ12' })).toEqual(REFUSED)
  })
})

describe('patch', () => {
  const stored = (over: Partial<KeySettings> = {}, policyId: string | null = 'pol_x'): KeySettings & { policy_id: string | null } => ({
    own_fields: [],
    plan: null,
    activation_limit: 5,
    metadata: {},
    release_after_seconds: null,
    deactivations_allowed: null,
    entitlements: {},
    grace_seconds: null,
    after_expiry: null,
    component_match: null,
    customer_email: null,
    customer_name: null,
    customer_external_id: null,
    policy_id: policyId,
    ...over,
  })
  const settingsOf = (t: ReturnType<typeof transition>) => ('write' in t && t.write.kind === 'settings' ? t.write.settings : null)

  test('nothing sent, or the stored values again: nothing', () => {
    expect(on(key(), { kind: 'patch', input: {} }, stored())).toEqual(SAME)
    expect(on(key(), { kind: 'patch', input: { plan: 'pro' } }, stored({ own_fields: ['plan'], plan: 'pro' }))).toEqual(SAME)
  })
  test('with a policy, a value given becomes an override; reset drops it (the limit column keeps its number)', () => {
    const t = on(key(), { kind: 'patch', input: { activation_limit: 9, grace_seconds: 30 } }, stored())
    expect(t).toMatchObject({ event: 'key.updated' })
    expect(settingsOf(t)).toMatchObject({ own_fields: ['activation_limit'], activation_limit: 9, grace_seconds: 30 })
    const r = on(key(), { kind: 'patch', input: { reset: ['activation_limit', 'plan', 'grace_seconds', 'entitlements'] } }, stored({ own_fields: ['activation_limit', 'plan'], activation_limit: 9, plan: 'x', grace_seconds: 30, entitlements: { a: true } }))
    expect(settingsOf(r)).toMatchObject({ own_fields: [], activation_limit: 9, plan: null, grace_seconds: null, entitlements: {} })
  })
  test('without a policy, reset goes back to the defaults and no own_fields are kept', () => {
    const r = on(key(), { kind: 'patch', input: { reset: ['activation_limit'], plan: 'pro' } }, stored({ activation_limit: 9 }, null))
    expect(settingsOf(r)).toMatchObject({ own_fields: [], activation_limit: 3, plan: 'pro' })
  })
  test('a revoked key takes new settings (it stays revoked: no status in the write)', () => {
    expect(settingsOf(on(revokedKey(), { kind: 'patch', input: { plan: 'pro' } }, stored({}, null)))).toMatchObject({ plan: 'pro' })
  })
  test('credits: written only when they differ from the key\'s', () => {
    const k = key({ credits: { remaining: 10, refill: null, refills_at: null } })
    const same = { wanted: { remaining: 10, refill: null }, input: { remaining: 10 } }
    expect(on(k, { kind: 'patch', input: { credits: { remaining: 10 } }, credits: same }, stored())).toEqual(SAME)
    const t = on(k, { kind: 'patch', input: { credits: null }, credits: { wanted: null, input: null } }, stored())
    expect(t).toMatchObject({ write: { kind: 'settings', credits: null }, event: 'key.updated' })
  })
})

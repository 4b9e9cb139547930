// Suspend, reinstate and reissue over the app: the key object and its events, the effective status
// everywhere it shows (validate, lists, devices, offline licenses and sync), the refusals, and the
// system's reinstatement at suspended_until (exactly once, however many sweeps race).
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { reinstateDueKeys } from '../../src/modules/keys/reinstate-sweeper'
import { fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ISO_MS, KEY_VALUE } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

async function setup(extra: Record<string, unknown> = {}) {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, extra)
  return { accountId: id, token, product, key }
}

const validate = (token: string, key: string, device: string) =>
  h.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })

const actorsOf = async (accountId: string, type: string) =>
  (await h.node.deps.sql<{ actor_type: string }[]>`select actor_type from events where account_id = ${accountId} and type = ${type} order by seq`).map(
    (r) => r.actor_type,
  )

describe('suspend', () => {
  test('suspend → 200 suspended with reason and until, key.suspended; validate, list, devices, offline all say suspended', async () => {
    const { accountId, token, key } = await setup()
    const device = fingerprint()
    expect((await validate(token, key.key_value, device)).body.valid).toBe(true)
    const until = new Date(Date.now() + 3_600_000).toISOString()
    const res = await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'chargeback', until } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: key.id, status: 'suspended', suspend_reason: 'chargeback', suspended_until: until, activations_used: 1 })
    expect(res.body.suspended_at).toMatch(ISO_MS)
    expect((await eventsOf(h, accountId, 'key.suspended')).map((e) => e.data)).toEqual([res.body])

    // validate: the known device and a new one are both refused, and no activation is recorded
    expect((await validate(token, key.key_value, device)).body).toEqual({ valid: false, reason: 'suspended' })
    expect((await validate(token, key.key_value, fingerprint())).body).toEqual({ valid: false, reason: 'suspended' })
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.activations).toHaveLength(1)

    const listed = await h.call('GET', '/v1/keys?status=suspended', { token })
    expect(listed.body.data.map((k: { id: string }) => k.id)).toEqual([key.id])
    expect((await h.call('GET', '/v1/keys?status=active', { token })).body.data).toEqual([])

    const devices = await h.call('POST', '/v1/devices', { token, body: { key: key.key_value } })
    expect(devices.body.status).toBe('suspended')

    expectProblem(await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint() } }), 409, 'key_suspended')

    // the holder can still release a device of a suspended key
    const released = await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: device } })
    expect(released.body).toMatchObject({ deactivated: true, activations_used: 0 })
  })

  test('offline license sync of a suspended key answers suspended; after reinstate it is renewed', async () => {
    const { token, key } = await setup()
    const issued = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint() } })
    expect(issued.status).toBe(201)
    await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: {} })
    const sync = await h.call('POST', '/v1/offline-licenses/sync', { token, body: { licenses: [issued.body.license] } })
    expect(sync.body.results).toEqual([{ id: issued.body.id, status: 'suspended' }])
    await h.call('POST', `/v1/keys/${key.id}/reinstate`, { token })
    const again = await h.call('POST', '/v1/offline-licenses/sync', { token, body: { licenses: [issued.body.license] } })
    expect(again.body.results[0].status).toBe('valid')
  })

  test('suspending again replaces reason and until: one event when something changed, none otherwise', async () => {
    const { accountId, token, key } = await setup()
    const first = await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'audit' } })
    const same = await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'audit' } })
    expect(same.body).toEqual(first.body)
    const until = new Date(Date.now() + 86_400_000).toISOString()
    const changed = await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'disputed', until } })
    expect(changed.body).toMatchObject({ suspend_reason: 'disputed', suspended_until: until, suspended_at: first.body.suspended_at })
    // the call states the suspension as a whole: an omitted reason and until become null
    const bare = await h.call('POST', `/v1/keys/${key.id}/suspend`, { token })
    expect(bare.body).toMatchObject({ status: 'suspended', suspend_reason: null, suspended_until: null })
    expect(await eventsOf(h, accountId, 'key.suspended')).toHaveLength(3)
  })

  test('reinstate → active, key.reinstated; on a key not suspended 200 unchanged, no event', async () => {
    const { accountId, token, key } = await setup()
    const device = fingerprint()
    const untouched = await h.call('POST', `/v1/keys/${key.id}/reinstate`, { token })
    expect(untouched.status).toBe(200)
    expect(untouched.body).toMatchObject({ status: 'active', suspended_at: null })
    await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'x' } })
    expect((await validate(token, key.key_value, device)).body.reason).toBe('suspended')
    const res = await h.call('POST', `/v1/keys/${key.id}/reinstate`, { token })
    expect(res.body).toMatchObject({ status: 'active', suspended_at: null, suspend_reason: null, suspended_until: null })
    expect((await eventsOf(h, accountId, 'key.reinstated')).map((e) => e.data)).toEqual([res.body])
    expect(await actorsOf(accountId, 'key.reinstated')).toEqual(['api_key'])
    expect((await validate(token, key.key_value, device)).body.valid).toBe(true)
  })

  test('precedence: revoked > suspended > expired; extend keeps a suspension, revoke ends it', async () => {
    const { token, key } = await setup()
    await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: {} })
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 hour' where id = ${key.id}`
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('suspended')
    // the update above bypassed the API: drop the key's hot state as a write through the API would
    h.node.deps.validation.hot.clear()
    expect((await validate(token, key.key_value, fingerprint())).body.reason).toBe('suspended')
    expect((await h.call('GET', '/v1/keys?status=expired', { token })).body.data).toEqual([])

    const extended = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: null } })
    expect(extended.body).toMatchObject({ status: 'suspended', expires_at: null })
    const revoked = await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'fraud' } })
    expect(revoked.body).toMatchObject({ status: 'revoked', suspended_at: null, suspend_reason: null, suspended_until: null })
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: {} }), 409, 'key_revoked')
    expect((await validate(token, key.key_value, fingerprint())).body.reason).toBe('revoked')
  })

  test('bad input → 400 and nothing changes; unknown key → 404', async () => {
    const { accountId, token, key } = await setup()
    const past = new Date(Date.now() - 60_000).toISOString()
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { until: past } }), 400, 'invalid_request')
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { until: 'tomorrow' } }), 400, 'invalid_request')
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'x'.repeat(501) } }), 400, 'invalid_request')
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('active')
    expect(await eventsOf(h, accountId, 'key.suspended')).toEqual([])
    expectProblem(await h.call('POST', '/v1/keys/key_nope/suspend', { token, body: {} }), 404, 'not_found')
  })
})

describe('reinstatement at suspended_until', () => {
  test('the system reinstates a due key exactly once, however many sweeps race; keys not due stay suspended', async () => {
    const { accountId, token, key } = await setup()
    const other = await newKey(h.call, token, key.product_id)
    const later = new Date(Date.now() + 3_600_000).toISOString()
    await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { until: later } })
    await h.call('POST', `/v1/keys/${other.id}/suspend`, { token, body: { until: later } })
    expect((await validate(token, key.key_value, fingerprint())).body.reason).toBe('suspended')
    await h.node.deps.sql`update license_keys set suspended_until = now() - interval '1 second' where id = ${key.id}`

    // four sweeps here race the node's own background sweep: one of them reinstates it, once
    const counts = await Promise.all(Array.from({ length: 4 }, () => reinstateDueKeys(h.node.deps)))
    expect(counts.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1)
    for (let i = 0; i < 50 && (await actorsOf(accountId, 'key.reinstated')).length === 0; i++) await Bun.sleep(100)
    expect(await actorsOf(accountId, 'key.reinstated')).toEqual(['system'])
    const [event] = await eventsOf(h, accountId, 'key.reinstated')
    expect(event!.data).toMatchObject({ id: key.id, status: 'active', suspended_at: null })
    // the sweep dropped the key's hot state: validate answers at once
    expect((await validate(token, key.key_value, fingerprint())).body.valid).toBe(true)
    expect((await h.call('GET', `/v1/keys/${other.id}`, { token })).body.status).toBe('suspended')
    expect(await reinstateDueKeys(h.node.deps)).toBe(0)
  })
})

describe('reissue', () => {
  test('a new value shown once: the old one is not_found, the new one validates with the same devices and history', async () => {
    const { accountId, token, key } = await setup({ activation_limit: 1 })
    const device = fingerprint()
    expect((await validate(token, key.key_value, device)).body.valid).toBe(true)
    const res = await h.call('POST', `/v1/keys/${key.id}/reissue`, { token })
    expect(res.status).toBe(200)
    expect(res.body.key_value).toMatch(KEY_VALUE)
    expect(res.body.key_value).not.toBe(key.key_value)
    expect(res.body).toMatchObject({ id: key.id, status: 'active', activations_used: 1, key_prefix: res.body.key_value.slice(0, 5) })

    expect((await validate(token, key.key_value, device)).body).toEqual({ valid: false, reason: 'not_found' })
    const again = await validate(token, res.body.key_value, device)
    expect(again.body).toMatchObject({ valid: true, activations_used: 1, activation_limit: 1 })
    expect((await validate(token, res.body.key_value, fingerprint())).body.reason).toBe('activation_limit')

    const { key_value, ...shown } = res.body
    const events = await eventsOf(h, accountId, 'key.reissued')
    expect(events.map((e) => e.data)).toEqual([shown])
    expect(JSON.stringify(events)).not.toContain(key_value)
    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(detail.body.activations).toHaveLength(1)
    expect(JSON.stringify(detail.body)).not.toContain(key_value)
  })

  test('a suspended key stays suspended under its new value; a revoked key is 409', async () => {
    const { token, key } = await setup()
    await h.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: {} })
    const res = await h.call('POST', `/v1/keys/${key.id}/reissue`, { token })
    expect(res.body.status).toBe('suspended')
    expect((await validate(token, res.body.key_value, fingerprint())).body.reason).toBe('suspended')
    await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/reissue`, { token }), 409, 'key_revoked')
  })
})

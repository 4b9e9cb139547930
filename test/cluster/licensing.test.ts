// Three real node processes and the licensing model: a suspension, a reinstatement and a reissue made
// on node A are what B and C answer as soon as A's call returns; a suspension with `until` ends by the
// nodes' own background sweeps, exactly once.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { fingerprint, pool, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/licensing')

const KEYS = 20

describe.if(ready)('three nodes: suspend, reinstate, reissue', () => {
  let c: Cluster
  let token: string
  let productId: string
  beforeAll(async () => {
    c = await startCluster(3)
    ;({ token, productId } = await c.tenant())
  }, 90_000)
  afterAll(() => c?.close(), 60_000)

  const validate = (node: number, key: string, device: string) =>
    c.nodes[node]!.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })

  test(`suspend and reinstate on A: B and C answer the change at once, ${KEYS} keys`, async () => {
    const keys = await pool(Array.from({ length: KEYS }), 8, () => newKey(c.call, token, productId))
    let stale = 0
    await pool(keys, 4, async (key) => {
      const device = fingerprint(1)
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, device)).body.valid).toBe(true)
      expect((await c.nodes[0]!.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { reason: 'audit' } })).status).toBe(200)
      for (const node of [1, 2]) if ((await validate(node, key.key_value, device)).body.reason !== 'suspended') stale++
      expect((await c.nodes[0]!.call('POST', `/v1/keys/${key.id}/reinstate`, { token })).status).toBe(200)
      for (const node of [1, 2]) if ((await validate(node, key.key_value, device)).body.valid !== true) stale++
    })
    console.log(`suspend/reinstate: ${stale} stale answers`)
    expect(stale).toBe(0)
  }, 180_000)

  test(`reissue on A: the old value is not_found on B and C at once, the new one validates with its devices, ${KEYS} keys`, async () => {
    const keys = await pool(Array.from({ length: KEYS }), 8, () => newKey(c.call, token, productId, { activation_limit: 1 }))
    let stale = 0
    await pool(keys, 4, async (key) => {
      const device = fingerprint(1)
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, device)).body.valid).toBe(true)
      const reissued = await c.nodes[0]!.call('POST', `/v1/keys/${key.id}/reissue`, { token })
      expect(reissued.status).toBe(200)
      for (const node of [1, 2]) {
        if ((await validate(node, key.key_value, device)).body.reason !== 'not_found') stale++
        const fresh = await validate(node, reissued.body.key_value, device)
        if (fresh.body.valid !== true || fresh.body.activations_used !== 1) stale++
      }
    })
    console.log(`reissue: ${stale} stale answers`)
    expect(stale).toBe(0)
  }, 180_000)

  test('suspended_until: every node answers valid again within seconds, each key reinstated once by the system', async () => {
    const keys = await pool(Array.from({ length: 10 }), 5, () => newKey(c.call, token, productId))
    const until = new Date(Date.now() + 3_000).toISOString()
    for (const key of keys) {
      expect((await c.call('POST', `/v1/keys/${key.id}/suspend`, { token, body: { until } })).status).toBe(200)
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, fingerprint(1))).body.reason).toBe('suspended')
    }
    const device = new Map(keys.map((k) => [k.key_value as string, fingerprint(2)]))
    const deadline = Date.parse(until) + 15_000
    const pending = new Set(keys.flatMap((k) => [0, 1, 2].map((node) => `${node} ${k.key_value}`)))
    while (pending.size > 0 && Date.now() < deadline) {
      for (const entry of [...pending]) {
        const [node, value] = entry.split(' ')
        if ((await validate(Number(node), value!, device.get(value!)!)).body.valid === true) pending.delete(entry)
      }
      if (pending.size > 0) await Bun.sleep(250)
    }
    expect(pending.size).toBe(0)
    const rows = await c.sql<{ id: string; n: number; actors: string[] }[]>`select data->>'id' as id, count(*)::int as n,
        array_agg(distinct actor_type) as actors
      from events where type = 'key.reinstated' and data->>'id' in ${c.sql(keys.map((k) => k.id))} group by 1`
    expect(rows).toHaveLength(keys.length)
    for (const r of rows) expect({ n: r.n, actors: r.actors }).toEqual({ n: 1, actors: ['system'] })
  }, 120_000)

  test(`a policy edit on A: B and C answer the new limit and entitlements at once, for all ${KEYS * 2} keys of the policy`, async () => {
    const policy = (await c.call('POST', '/v1/policies', { token, body: { product_id: productId, name: 'Pro', activation_limit: 1, entitlements: { export: true } } })).body
    const keys = await pool(Array.from({ length: KEYS * 2 }), 8, async () => (await c.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body)
    const device = new Map(keys.map((k) => [k.id as string, fingerprint(1)]))
    // every node holds every key, and the policy, in memory
    await pool(keys, 4, async (key) => {
      for (const node of [0, 1, 2]) {
        const res = await validate(node, key.key_value, device.get(key.id)!)
        expect(res.body).toMatchObject({ valid: true, activation_limit: 1, entitlements: { export: true } })
        expect((await validate(node, key.key_value, fingerprint(2))).body.reason).toBe('activation_limit')
      }
    })
    const patched = await c.nodes[0]!.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { activation_limit: 2, entitlements: { sso: true } } })
    expect(patched.status).toBe(200)
    let stale = 0
    await pool(keys, 4, async (key, i) => {
      const node = 1 + (i % 2)
      const known = await validate(node, key.key_value, device.get(key.id)!)
      if (known.body.activation_limit !== 2 || known.body.entitlements?.sso !== true || 'export' in (known.body.entitlements ?? {})) stale++
      const required = await c.nodes[3 - node]!.call('POST', '/v1/validate', {
        token,
        body: { key: key.key_value, device_fingerprint: device.get(key.id)!, require_entitlements: ['export'] },
      })
      if (required.body.reason !== 'entitlements_missing') stale++
      const fresh = await validate(node, key.key_value, fingerprint(3))
      if (fresh.body.valid !== true || fresh.body.activations_used !== 2) stale++
    })
    console.log(`policy edit: ${stale} stale answers over ${keys.length} keys`)
    expect(stale).toBe(0)
    const events = await c.sql<{ n: number }[]>`select count(*)::int as n from events where type = 'policy.updated' and data->>'id' = ${policy.id}`
    expect(events[0]!.n).toBe(1)
  }, 180_000)

  test('one_key_per_device: one device racing for three keys of the policy on three nodes gets exactly one', async () => {
    const policy = (await c.call('POST', '/v1/policies', { token, body: { product_id: productId, name: 'Trial', one_key_per_device: true } })).body
    let wrong = 0
    for (let round = 0; round < 10; round++) {
      const keys = await Promise.all([0, 1, 2].map(async () => (await c.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body))
      const device = fingerprint(round)
      const answers = await Promise.all(keys.map((key, node) => validate(node, key.key_value, device)))
      const valid = answers.filter((a) => a.body.valid === true).length
      const used = answers.filter((a) => a.body.reason === 'device_already_used').length
      if (valid !== 1 || used !== 2) wrong++
    }
    expect(wrong).toBe(0)
  }, 120_000)

  test('expiry_basis first_activation: three devices on three nodes at once set the expiry once, every node answers it', async () => {
    const policy = (await c.call('POST', '/v1/policies', {
      token,
      body: { product_id: productId, name: 'Trial 14 days', duration: 'P14D', expiry_basis: 'first_activation' },
    })).body
    for (let round = 0; round < 5; round++) {
      const key = (await c.call('POST', '/v1/keys', { token, body: { policy_id: policy.id } })).body
      const devices = [0, 1, 2].map((node) => fingerprint(node))
      const answers = await Promise.all([0, 1, 2].map((node) => validate(node, key.key_value, devices[node]!)))
      for (const a of answers) expect(a.body.valid).toBe(true)
      const [row] = await c.sql<{ expires_at: Date; pending_duration: string | null }[]>`select expires_at, pending_duration from license_keys where id = ${key.id}`
      expect(row!.pending_duration).toBeNull()
      const expiresAt = row!.expires_at.toISOString()
      for (const a of answers) expect(a.body.expires_at).toBe(expiresAt)
      // each node answers the same expiry for every device, the ones it did not see activate included
      for (const node of [0, 1, 2]) {
        for (const device of devices) expect((await validate(node, key.key_value, device)).body.expires_at).toBe(expiresAt)
      }
    }
  }, 120_000)
})

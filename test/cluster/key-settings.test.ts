// Three real node processes: PATCH /v1/keys/:id on node A is what B and C answer as soon as A's call
// returns (activation_limit lowered, then raised), and an inactivity release by the nodes' own
// background job frees the slot on every node, with one event.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { fingerprint, pool, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/key-settings')

const KEYS = 40

describe.if(ready)('three nodes: key settings and inactivity release', () => {
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

  test(`PATCH activation_limit on A: B and C refuse or accept the next new device at once, ${KEYS} keys`, async () => {
    const created = await pool(Array.from({ length: KEYS }), 8, () => newKey(c.call, token, productId, { activation_limit: 2 }))
    let stale = 0
    await pool(created, 4, async (key) => {
      const first = fingerprint(1)
      // every node holds the key in memory with one device and one free slot
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, first)).body.valid).toBe(true)
      const lowered = await c.nodes[0]!.call('PATCH', `/v1/keys/${key.id}`, { token, body: { activation_limit: 1 } })
      expect(lowered.status).toBe(200)
      for (const node of [1, 2]) {
        const res = await validate(node, key.key_value, fingerprint(2))
        if (res.body.reason !== 'activation_limit') stale++
        // the device already in place keeps validating, with the new limit in the answer
        const kept = await validate(node, key.key_value, first)
        if (kept.body.valid !== true || kept.body.activation_limit !== 1) stale++
      }
      const raised = await c.nodes[0]!.call('PATCH', `/v1/keys/${key.id}`, { token, body: { activation_limit: 2 } })
      expect(raised.status).toBe(200)
      const res = await validate(1 + Math.floor(Math.random() * 2), key.key_value, fingerprint(3))
      if (res.body.valid !== true || res.body.activation_limit !== 2) stale++
    })
    console.log(`patch activation_limit: ${stale} stale answers`)
    expect(stale).toBe(0)
    const updated = await c.sql<{ n: number }[]>`select count(*)::int as n from events
      where type = 'key.updated' and data->>'id' in ${c.sql(created.map((k) => k.id))}`
    expect(updated[0]!.n).toBe(KEYS * 2)
  }, 180_000)

  test('an idle device is released once by the nodes themselves and its slot is free on every node', async () => {
    const keys = await pool(Array.from({ length: 6 }), 6, () => newKey(c.call, token, productId, { activation_limit: 1, release_after_seconds: 60 }))
    const holder = new Map<string, string>()
    for (const key of keys) {
      const device = fingerprint(1)
      holder.set(key.id, device)
      // every node knows the key with its one slot taken
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, device)).body.valid).toBe(true)
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, fingerprint(9))).body.reason).toBe('activation_limit')
    }
    await Bun.sleep(1_500) // the repeat validations' last-seen writes land before time moves back
    const ids = keys.map((k) => k.id)
    await c.sql`update activations set last_validated_at = now() - interval '10 minutes', activated_at = now() - interval '10 minutes'
      where key_id in ${c.sql(ids)} and status = 'active'`

    // the background jobs (every second on each node) release them within the grace
    const deadline = Date.now() + 20_000
    let left = ids.length
    while (left > 0 && Date.now() < deadline) {
      await Bun.sleep(250)
      ;[{ n: left }] = await c.sql<{ n: number }[]>`select count(*)::int as n from activations where key_id in ${c.sql(ids)} and status = 'active'`
    }
    expect(left).toBe(0)
    const released = await c.sql<{ key_id: string; n: number }[]>`select data->>'key_id' as key_id, count(*)::int as n from events
      where type = 'activation.deactivated' and data->>'key_id' in ${c.sql(ids)} and data->'activation'->>'deactivation_reason' = 'inactive'
      group by 1`
    expect(released.map((r) => r.n)).toEqual(ids.map(() => 1))

    // a new device takes the slot on any node; every node then refuses the released one
    for (const [i, key] of keys.entries()) {
      const newcomer = fingerprint(2)
      expect((await validate(i % 3, key.key_value, newcomer)).body).toMatchObject({ valid: true, activations_used: 1 })
      for (const node of [0, 1, 2]) {
        expect((await validate(node, key.key_value, holder.get(key.id)!)).body).toEqual({ valid: false, reason: 'activation_limit' })
      }
    }
  }, 120_000)
})

// Three real node processes: a holder's own deactivation on node A frees the slot on B and C as soon as
// A's call returns, the holder's cap holds across nodes, and a device's name set through one node is
// seen in the devices list of another.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { fingerprint, pool, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/devices')

const KEYS = 60

describe.if(ready)('three nodes: device self-service', () => {
  let c: Cluster
  let token: string
  let productId: string
  beforeAll(async () => {
    c = await startCluster(3)
    ;({ token, productId } = await c.tenant())
  }, 60_000)
  afterAll(() => c?.close(), 60_000)

  const call = (node: number, path: string, body: Record<string, unknown>) => c.nodes[node]!.call('POST', path, { token, body })
  const validate = (node: number, key: string, device: string, extra: Record<string, unknown> = {}) =>
    call(node, '/v1/validate', { key, device_fingerprint: device, ...extra })

  test(`a holder deactivation on A frees the slot on B and drops the device on C, ${KEYS} keys`, async () => {
    const created = await pool(Array.from({ length: KEYS }), 8, () => newKey(c.call, token, productId, { activation_limit: 1 }))
    let stale = 0
    await pool(created, 6, async (key) => {
      const [first, second] = [fingerprint(1), fingerprint(2)]
      for (const node of [0, 1, 2]) expect((await validate(node, key.key_value, first)).body.valid).toBe(true)
      // every node holds the key with its one slot taken
      for (const node of [1, 2]) expect((await validate(node, key.key_value, second)).body.reason).toBe('activation_limit')
      const off = await call(0, '/v1/deactivate', { key: key.key_value, device_fingerprint: first })
      expect(off.body).toEqual({ deactivated: true, activations_used: 0, activation_limit: 1 })
      // B: the slot is free at once; C: the released device no longer holds it
      const taken = await validate(1, key.key_value, second, { device_name: 'new laptop' })
      if (taken.body.valid !== true) stale++
      const gone = await validate(2, key.key_value, first)
      if (gone.body.reason !== 'activation_limit') stale++
      const listed = await call(2, '/v1/devices', { key: key.key_value })
      expect(listed.body.devices.map((d: any) => [d.device_fingerprint, d.device_name])).toEqual([[second, 'new laptop']])
    })
    console.log(`holder deactivation: ${stale} stale answers in ${KEYS * 2} checks`)
    expect(stale).toBe(0)
  }, 180_000)

  test('the holder cap holds across nodes: 9 devices released through 3 nodes at once, 3 allowed', async () => {
    const key = await newKey(c.call, token, productId, { activation_limit: 9 })
    const devices = Array.from({ length: 9 }, (_, i) => fingerprint(i))
    for (const [i, fp] of devices.entries()) expect((await validate(i % 3, key.key_value, fp)).body.valid).toBe(true)
    await c.sql`update license_keys set deactivations_allowed = 3 where id = ${key.id}`
    const answers = await Promise.all(devices.map((fp, i) => call(i % 3, '/v1/deactivate', { key: key.key_value, device_fingerprint: fp })))
    expect(answers.filter((a) => a.status === 200 && a.body.deactivated === true)).toHaveLength(3)
    expect(answers.filter((a) => a.status === 409 && a.body.code === 'deactivation_limit')).toHaveLength(6)
    const [row] = await c.sql<{ used: number; active: number }[]>`select deactivations_used as used,
        (select count(*)::int from activations where key_id = ${key.id} and status = 'active') as active
      from license_keys where id = ${key.id}`
    expect(row).toEqual({ used: 3, active: 6 })
  }, 60_000)

  test("a rename sent to one node shows in another node's list once the batched write ran", async () => {
    const key = await newKey(c.call, token, productId)
    const fp = fingerprint(7)
    expect((await validate(0, key.key_value, fp, { device_name: 'before' })).body.valid).toBe(true)
    expect((await validate(1, key.key_value, fp, { device_name: 'after' })).body.valid).toBe(true)
    // node B shows it at once; node C once B's last-seen flush (FLUSH_INTERVAL_MS, 1 s) has written it
    expect((await call(1, '/v1/devices', { key: key.key_value })).body.devices[0].device_name).toBe('after')
    const deadline = Date.now() + 15_000
    let name: string | null = null
    while (Date.now() < deadline) {
      name = (await call(2, '/v1/devices', { key: key.key_value })).body.devices[0].device_name
      if (name === 'after') break
      await Bun.sleep(200)
    }
    expect(name).toBe('after')
  }, 60_000)
})

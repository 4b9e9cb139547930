// Three real node processes with a long last-seen flush interval (120 s), so a repeat validation stays
// in its node's memory: the inactivity release run by the nodes' own background jobs must not release
// a device whose only recent valid answer sits unwritten in another node's batch (every node writes
// its batch when a sweep finds something due: the barrier), while a device that really went silent is
// released once.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey, newProduct } from '../support/harness'
import { fingerprint, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { waitUntil } from '../support/wait'

const ready = await requireCluster('cluster/inactivity-release')

describe.if(ready)('three nodes, last-seen times held in memory', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3, { env: { FLUSH_INTERVAL_MS: '120000' } })
  }, 60_000)
  afterAll(() => c?.close(), 60_000)

  test('a device that validated on another node just before the sweep is kept; a silent one is released once', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    const key = await newKey(c.call, token, product.id, { activation_limit: 2, release_after_seconds: 60 })
    const [alive, silent] = [fingerprint(1), fingerprint(2)]
    const validate = (node: number, device: string) =>
      c.nodes[node]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })
    for (const d of [alive, silent]) expect((await validate(0, d)).body.valid).toBe(true)
    // One of them validates again on node 2: valid, and its time waits in node 2's batch (written every
    // 120 s: not during this test unless a barrier asks)...
    expect((await validate(2, alive)).body.valid).toBe(true)
    // ...while Postgres says both have been idle for 10 minutes (past 60 s + the 121 s grace). The
    // answer comes before the backdating, so no sweep can run between the two (an answer given while a
    // sweep is under way races it, as documented).
    await c.sql`update activations set last_validated_at = now() - interval '10 minutes', activated_at = now() - interval '10 minutes'
      where key_id = ${key.id} and status = 'active'`

    // the three nodes sweep every second; the silent device goes, the other one stays
    const status = async (device: string) =>
      (await c.sql<{ status: string }[]>`select status from activations where key_id = ${key.id} and device_fingerprint = ${device}
        order by activated_at desc limit 1`)[0]!.status
    const deadline = Date.now() + 20_000
    while ((await status(silent)) === 'active' && Date.now() < deadline) await Bun.sleep(200)
    expect(await status(silent)).toBe('deactivated')
    await Bun.sleep(2_500) // more sweeps on every node
    expect(await status(alive)).toBe('active')
    const [{ n }] = await c.sql<{ n: number }[]>`select count(*)::int as n from events
      where type = 'activation.deactivated' and data->>'key_id' = ${key.id}`
    expect(n).toBe(1)
    const [row] = await c.sql<{ last_validated_at: Date }[]>`select last_validated_at from activations
      where key_id = ${key.id} and device_fingerprint = ${alive} and status = 'active'`
    expect(Date.now() - row!.last_validated_at.getTime()).toBeLessThan(60_000) // written by node 2's barrier flush
    expect((await validate(1, alive)).body).toMatchObject({ valid: true, activations_used: 1 })
  }, 60_000)
})

// The fault rule for a release nobody waits on: while NATS is down, an inactivity release must not let
// another device take the freed seat before every node has dropped the released device (its ack, its
// seen row or its trust window), or a 2-seat key has 3 valid devices for a moment.
describe.if(ready)('three nodes, inactivity release while NATS is down', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3, { privateNats: true, env: { DEGRADED_TTL_MS: '2000' } })
  }, 60_000)
  afterAll(() => c?.close(), 60_000)

  // A few rounds: before the fix, whether a node still held the released device when the newcomer got
  // its seat depended on where that node's lease renewal stood (up to 500 ms).
  const ROUNDS = 3

  test('the freed seat goes to a new device only once no node answers valid for the released one', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    const keys = []
    for (let i = 0; i < ROUNDS; i++) keys.push(await newKey(c.call, token, product.id, { activation_limit: 2, release_after_seconds: 60 }))
    const validate = async (node: number, key: { key_value: string }, device: string) =>
      (await c.nodes[node]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).body

    await c.nats.stop()
    const natsStates = async () => Promise.all(c.nodes.map(async (node) => (await node.call('GET', '/readyz')).body.nats))
    await waitUntil(async () => (await natsStates()).every((s) => s !== 'ok'), 20_000, 'every node sees NATS down')

    const stale: string[] = []
    for (const [round, key] of keys.entries()) {
      const [idle, kept, newcomer] = [fingerprint(10 * round + 1), fingerprint(10 * round + 2), fingerprint(10 * round + 3)]
      // both seats taken; every node holds the key with both devices in memory
      for (let node = 0; node < 3; node++) for (const d of [idle, kept]) expect((await validate(node, key, d)).valid).toBe(true)
      await Bun.sleep(1_500) // the repeat validations' last-seen times are written (FLUSH_INTERVAL_MS)
      await c.sql`update activations set last_validated_at = now() - interval '10 minutes', activated_at = now() - interval '10 minutes'
        where key_id = ${key.id} and device_fingerprint = ${idle} and status = 'active'`

      // The nodes' own sweeps release the idle device; the newcomer asks every node in turn until it has the seat.
      let node = 0
      const deadline = Date.now() + 30_000
      while (!(await validate(node, key, newcomer)).valid) {
        if (Date.now() > deadline) throw new Error('the newcomer never got the released seat')
        node = (node + 1) % 3
      }
      // From now on the key's seats are `kept` and `newcomer`: a node answering valid for the released
      // device (from memory it has not dropped yet) makes three valid devices.
      for (const until = Date.now() + 1_500; Date.now() < until; ) {
        for (let n = 0; n < 3; n++) if ((await validate(n, key, idle)).valid) stale.push(`round ${round}, node ${n}`)
      }
      const rows = await c.sql<{ device_fingerprint: string }[]>`select device_fingerprint from activations where key_id = ${key.id} and status = 'active'`
      expect(rows.map((r) => r.device_fingerprint).sort()).toEqual([kept, newcomer].sort())
    }
    expect(stale).toEqual([])
    await c.nats.start()
  }, 120_000)
})

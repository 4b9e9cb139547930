// Metered keys are never over-granted: with three real nodes validating one key at once, the sum of
// the costs of the valid answers never exceeds the credits granted, with no fault, with a node killed
// with -9 mid-load, with every node's Redis connection cut and restored, and with NATS stopped and
// started again (a private server; the machine's shared one is never touched). Without a fault every
// credit is spent or still shown; a kill may strand what that node's leases held (an under-grant).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { fingerprint, startCluster, type Cluster, type NodeProcess } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { waitUntil } from '../support/wait'

const ready = await requireCluster('cluster/credits')

const WORKERS_PER_NODE = 4

describe.if(ready)('credits across nodes', () => {
  let c: Cluster
  let token: string
  let productId: string
  const device = fingerprint(1)
  beforeAll(async () => {
    c = await startCluster(3, { proxies: true, privateNats: true, env: { DEGRADED_TTL_MS: '1500' } })
    ;({ token, productId } = await c.tenant())
  }, 60_000)
  afterAll(() => c?.close(), 30_000)

  const remainingOf = async (id: string) => (await c.nodes[0]!.call('GET', `/v1/keys/${id}`, { token })).body.credits.remaining as number

  /**
   * Every live node validates the key from WORKERS_PER_NODE loops at once, costs 1..3, until each loop
   * has been refused credits_exhausted 5 times in a row (or `stop()` says so). `during` runs meanwhile
   * (a fault). Returns the sum of the costs of the valid answers received.
   */
  async function spendAll(keyValue: string, nodes: () => NodeProcess[], during?: (spent: () => number) => Promise<void>) {
    let spent = 0
    const loops = nodes().flatMap((node) =>
      Array.from({ length: WORKERS_PER_NODE }, async (_, w) => {
        let refusals = 0
        let i = w
        while (refusals < 5) {
          if (!nodes().includes(node)) return // killed
          const cost = 1 + (i++ % 3)
          let res
          try {
            res = await node.call('POST', '/v1/validate', { token, body: { key: keyValue, device_fingerprint: device, cost } })
          } catch {
            if (!nodes().includes(node)) return
            throw new Error('a live node failed to answer')
          }
          expect(res.status).toBe(200) // never a 5xx, whatever the fault
          if (res.body.valid) {
            spent += cost
            refusals = 0
          } else {
            expect(res.body.reason).toBe('credits_exhausted')
            refusals++
            await Bun.sleep(20)
          }
        }
      }),
    )
    await Promise.all([...loops, during?.(() => spent)])
    return spent
  }

  const meteredKey = async (credits: number) => {
    const key = await newKey(c.call, token, productId, { credits: { remaining: credits } })
    for (const node of c.nodes) expect((await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device, cost: 0 } })).body.valid).toBe(true)
    return key
  }

  test('three nodes under concurrent load: exactly what was granted is spent, then every node refuses', async () => {
    const key = await meteredKey(3000)
    const spent = await spendAll(key.key_value, () => c.nodes)
    console.log(`no fault: spent ${spent} of 3000`)
    expect(spent).toBeLessThanOrEqual(3000)
    // nothing is lost without a fault: what was not spent is still the key's, and shows within a flush or two
    await waitUntil(async () => spent + (await remainingOf(key.id)) === 3000, 15_000, 'spent + remaining = granted')
    // an addition reaches every node
    expect((await c.nodes[1]!.call('POST', `/v1/keys/${key.id}/credits`, { token, body: { operation: 'add', amount: 30 } })).status).toBe(200)
    const more = await spendAll(key.key_value, () => c.nodes)
    expect(spent + more).toBeLessThanOrEqual(3030)
    await waitUntil(async () => spent + more + (await remainingOf(key.id)) === 3030, 15_000, 'spent + remaining = granted')
  }, 120_000)

  test('Redis cut and restored on every node mid-load: never over-granted', async () => {
    const key = await meteredKey(2000)
    const spent = await spendAll(key.key_value, () => c.nodes, async (soFar) => {
      await waitUntil(async () => soFar() > 300, 20_000, 'load under way')
      for (const node of c.nodes) node.redis!.cut()
      await waitUntil(async () => soFar() > 900, 20_000, 'load during the outage')
      for (const node of c.nodes) node.redis!.restore()
    })
    console.log(`redis cut: spent ${spent} of 2000`)
    expect(spent).toBeLessThanOrEqual(2000)
    await waitUntil(async () => spent + (await remainingOf(key.id)) === 2000, 15_000, 'spent + remaining = granted')
  }, 120_000)

  test('NATS stopped and started again mid-load: never over-granted', async () => {
    const key = await meteredKey(2000)
    const spent = await spendAll(key.key_value, () => c.nodes, async (soFar) => {
      await waitUntil(async () => soFar() > 300, 20_000, 'load under way')
      await c.nats.stop()
      await waitUntil(async () => soFar() > 700, 30_000, 'load during the outage')
      await c.nats.start()
    })
    console.log(`nats restart: spent ${spent} of 2000`)
    expect(spent).toBeLessThanOrEqual(2000)
    await waitUntil(
      async () => (await Promise.all(c.nodes.map(async (n) => (await n.call('GET', '/readyz')).body.nats))).every((s) => s === 'ok'),
      20_000,
      'every node back on the bus',
    )
    await waitUntil(async () => spent + (await remainingOf(key.id)) === 2000, 15_000, 'spent + remaining = granted')
  }, 120_000)

  // last: it leaves two nodes
  test('a node killed with -9 mid-load strands at most its leases, never over-grants', async () => {
    const key = await meteredKey(3000)
    let live = [...c.nodes]
    const spent = await spendAll(key.key_value, () => live, async (soFar) => {
      await waitUntil(async () => soFar() > 600, 20_000, 'load under way')
      const victim = live[2]!
      live = live.slice(0, 2)
      await victim.stop('SIGKILL')
    })
    // the dead node's lease rows stop counting once it stopped writing them
    await Bun.sleep(16_000)
    const remaining = await remainingOf(key.id)
    console.log(`kill -9: spent ${spent} of 3000, ${remaining} left, ${3000 - spent - remaining} stranded`)
    expect(spent).toBeLessThanOrEqual(3000)
    expect(spent + remaining).toBeLessThanOrEqual(3000)
  }, 120_000)
})

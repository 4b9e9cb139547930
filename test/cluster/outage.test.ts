// Dependency outages with three real nodes, each behind its own TCP proxies to NATS and Redis (the
// shared servers stay up for everyone else): cut, stall and restore a node's connections.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { utcDay } from '../../src/infra/counters'
import { newKey, newProduct } from '../support/harness'
import { fingerprint, pool, startCluster, type Cluster, type NodeProcess } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { waitUntil } from '../support/wait'

const ready = await requireCluster('cluster/outage')

const DEGRADED_TTL_MS = 2000
/** A validate answer takes a little while to travel back; a request sent at t may report state from t-ε. */
const SLACK_MS = 250

describe.if(ready)('outages', () => {
  let c: Cluster
  let token: string
  let productId: string
  const device = fingerprint(7)
  beforeAll(async () => {
    c = await startCluster(3, { proxies: true, env: { DEGRADED_TTL_MS: String(DEGRADED_TTL_MS) } })
    ;({ token, productId } = await c.tenant())
  }, 60_000)
  afterAll(() => c?.close())

  const validate = (node: NodeProcess, key: string) => node.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })
  const natsState = async (node: NodeProcess) => (await node.call('GET', '/readyz')).body.nats
  const waitFor = (what: string, cond: () => Promise<boolean>, ms = 15_000) => waitUntil(cond, ms, what)
  const warmKeys = async (n: number) => {
    const keys = await pool(Array.from({ length: n }), 6, () => newKey(c.call, token, productId))
    for (const k of keys) for (const node of c.nodes) expect((await validate(node, k.key_value)).body.valid).toBe(true)
    return keys
  }

  /**
   * Revokes `keys` on `writer` while `readers` keep validating them, until the degraded TTL has passed
   * since the last revoke. Returns, per reader, the longest time a key still answered valid to a
   * request sent after its revoke had returned.
   */
  const revokeAndWatch = async (writer: NodeProcess, readers: NodeProcess[], keys: { id: string; key_value: string }[]) => {
    const revokedAt = new Map<string, number>()
    const worst = readers.map(() => 0)
    let watching = true
    const watchers = readers.map(async (node, r) => {
      while (watching) {
        for (const k of keys) {
          const sent = performance.now()
          const res = await validate(node, k.key_value)
          expect(res.status).toBe(200) // never a 5xx during the outage
          const at = revokedAt.get(k.id)
          if (res.body.valid && at !== undefined && sent > at) worst[r] = Math.max(worst[r]!, sent - at)
        }
        await Bun.sleep(10)
      }
    })
    for (const k of keys) {
      expect((await writer.call('POST', `/v1/keys/${k.id}/revoke`, { token, body: {} })).status).toBe(200)
      revokedAt.set(k.id, performance.now())
    }
    await Bun.sleep(DEGRADED_TTL_MS + 1000)
    watching = false
    await Promise.all(watchers)
    return worst
  }

  test('NATS gone for every node (a restart): no valid answer for a revoked key past the degraded TTL; all revoked after reconnect', async () => {
    const keys = await warmKeys(12)
    for (const node of c.nodes) node.nats!.cut()
    await waitFor('every node to see the bus down', async () => (await Promise.all(c.nodes.map(natsState))).every((s) => s === 'down'))
    const worst = await revokeAndWatch(c.nodes[0]!, [c.nodes[1]!, c.nodes[2]!], keys.slice(0, 6))
    console.log(`NATS down everywhere: revoked keys answered valid up to ${worst.map((w) => w.toFixed(0)).join(' / ')} ms after the revoke (degraded TTL ${DEGRADED_TTL_MS} ms)`)
    for (const w of worst) expect(w).toBeLessThanOrEqual(DEGRADED_TTL_MS + SLACK_MS)
    for (const node of c.nodes) node.nats!.restore()
    await waitFor('every node to reconnect', async () => (await Promise.all(c.nodes.map(natsState))).every((s) => s === 'ok'))
    for (const k of keys.slice(0, 6)) for (const node of c.nodes) expect((await validate(node, k.key_value)).body.reason).toBe('revoked')
    // and the bus works again: revoke on A, B and C agree at once
    for (const k of keys.slice(6)) {
      await c.nodes[0]!.call('POST', `/v1/keys/${k.id}/revoke`, { token, body: {} })
      for (const node of c.nodes.slice(1)) expect((await validate(node, k.key_value)).body.reason).toBe('revoked')
    }
  }, 60_000)

  test("one node's NATS connection cut: the others stay exact, it stays within the degraded TTL, then catches up", async () => {
    const keys = await warmKeys(6)
    const [a, b, cut] = c.nodes as [NodeProcess, NodeProcess, NodeProcess]
    cut.nats!.cut()
    await waitFor('the cut node to see the bus down', async () => (await natsState(cut)) === 'down')
    const worst = await revokeAndWatch(a, [b, cut], keys)
    console.log(`one node cut: valid after revoke up to ${worst[0]!.toFixed(0)} ms on a connected node, ${worst[1]!.toFixed(0)} ms on the cut one`)
    expect(worst[0]).toBe(0)
    expect(worst[1]!).toBeLessThanOrEqual(DEGRADED_TTL_MS + SLACK_MS)
    cut.nats!.restore()
    await waitFor('the node to reconnect', async () => (await natsState(cut)) === 'ok')
    for (const k of keys) expect((await validate(cut, k.key_value)).body.reason).toBe('revoked')
  }, 60_000)

  test('a silently stalled NATS connection (no disconnect seen yet): the change sequence still bounds staleness', async () => {
    const keys = await warmKeys(6)
    const [a, b, stalled] = c.nodes as [NodeProcess, NodeProcess, NodeProcess]
    stalled.nats!.stall()
    const worst = await revokeAndWatch(a, [b, stalled], keys)
    console.log(`stalled connection: valid after revoke up to ${worst[0]!.toFixed(0)} ms on a connected node, ${worst[1]!.toFixed(0)} ms on the stalled one`)
    expect(worst[0]).toBe(0)
    expect(worst[1]!).toBeLessThanOrEqual(DEGRADED_TTL_MS + SLACK_MS)
    // end the stall as a network would: the dead connection goes away, a new one can be made
    stalled.nats!.cut()
    stalled.nats!.restore()
    await waitFor('the node to reconnect', async () => (await natsState(stalled)) === 'ok')
    for (const k of keys) expect((await validate(stalled, k.key_value)).body.reason).toBe('revoked')
  }, 60_000)

  test('Redis gone mid-load: every validate answers 200, and counting resumes when it is back', async () => {
    const { id: accountId, token: t2 } = await c.account('growth')
    const product = await newProduct(c.call, t2)
    const key = await newKey(c.call, t2, product.id)
    const statuses = new Map<number, number>()
    let stop = false
    const load = c.nodes.map(async (node, n) => {
      for (let i = 0; !stop; i++) {
        const res = await node.call('POST', '/v1/validate', { token: t2, body: { key: key.key_value, device_fingerprint: fingerprint(n, 'aa') } })
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      }
    })
    await Bun.sleep(800)
    for (const node of c.nodes) node.redis!.cut()
    await waitFor('Redis to be down everywhere', async () =>
      (await Promise.all(c.nodes.map(async (node) => (await node.call('GET', '/readyz')).body.redis))).every((s) => s === 'down'),
    )
    await Bun.sleep(1500)
    for (const node of c.nodes) node.redis!.restore()
    await waitFor('Redis to be back everywhere', async () =>
      (await Promise.all(c.nodes.map(async (node) => (await node.call('GET', '/readyz')).body.redis))).every((s) => s === 'ok'),
    )
    await Bun.sleep(800)
    stop = true
    await Promise.all(load)
    const total = [...statuses.values()].reduce((a, b) => a + b, 0)
    console.log(`Redis outage under load: ${JSON.stringify(Object.fromEntries(statuses))} (status → count)`)
    expect(statuses.get(200)).toBe(total)
    // the counts made while Redis was away reach it (flush interval 1 s)
    const redis = new Redis(process.env.REDIS_URL!)
    try {
      await waitFor('the counts to be flushed', async () => Number(await redis.get(`keyward:calls:${utcDay()}:${accountId}`)) >= total, 10_000)
      console.log(`calls counted in Redis: ${await redis.get(`keyward:calls:${utcDay()}:${accountId}`)} of ${total} answered`)
    } finally {
      redis.disconnect()
    }
  }, 60_000)
})

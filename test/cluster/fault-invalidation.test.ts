// The invalidation promise under bus faults (../../shared ARCHITECTURE "Fault rule for invalidation"):
// a write that changes an answer (revoke, extend, activation removal, API-key deletion) returns only
// when no node can answer the old state any more. Three real nodes on a private NATS server (stopped
// and restarted here; the machine's shared server is never touched), each behind its own TCP proxy so
// one node can be cut off silently. While every write runs, every node is asked about every changed
// key without pause; an old answer to a request sent after the write returned is a broken promise.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { fingerprint, startCluster, type Cluster, type NodeProcess } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { waitUntil } from '../support/wait'

const ready = await requireCluster('cluster/fault-invalidation')

const DEGRADED_TTL_MS = 1500
const PER_KIND = 3

/** One change: `write` makes it on a node, `stale(node)` asks a node and says whether it answered the old state. */
interface Change {
  kind: 'revoke' | 'extend' | 'activation removal' | 'API-key deletion'
  write(node: NodeProcess): Promise<number>
  stale(node: NodeProcess): Promise<boolean>
}

describe.if(ready)('invalidation under bus faults', () => {
  let c: Cluster
  let token: string
  let productId: string
  beforeAll(async () => {
    c = await startCluster(3, { proxies: true, privateNats: true, env: { DEGRADED_TTL_MS: String(DEGRADED_TTL_MS) } })
    ;({ token, productId } = await c.tenant())
  }, 60_000)
  afterAll(() => c?.close(), 30_000) // three node processes stopping on a loaded machine

  const validate = (node: NodeProcess, key: string, device: string) =>
    node.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })
  const natsStates = async () => Promise.all(c.nodes.map(async (node) => (await node.call('GET', '/readyz')).body.nats))
  const waitFor = (what: string, cond: () => Promise<boolean>, ms = 20_000) => waitUntil(cond, ms, what)
  const allUp = () => waitFor('every node back on the bus', async () => (await natsStates()).every((s) => s === 'ok'))

  /** PER_KIND changes of each kind, with every node's memory warm on the old state. */
  const prepare = async (): Promise<Change[]> => {
    const changes: Change[] = []
    for (let i = 0; i < PER_KIND; i++) {
      const device = fingerprint(i)
      const other = fingerprint(100 + i)

      const revoked = await newKey(c.call, token, productId)
      changes.push({
        kind: 'revoke',
        write: async (node) => (await node.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status,
        stale: async (node) => (await validate(node, revoked.key_value, device)).body.valid === true,
      })

      const extended = await newKey(c.call, token, productId, { expires_at: new Date(Date.now() + 86_400_000).toISOString() })
      const later = new Date(Date.now() + 30 * 86_400_000 + i * 1000).toISOString()
      changes.push({
        kind: 'extend',
        write: async (node) => (await node.call('POST', `/v1/keys/${extended.id}/extend`, { token, body: { expires_at: later } })).status,
        stale: async (node) => (await validate(node, extended.key_value, device)).body.expires_at !== later,
      })

      // One slot, held by `device`: once its activation is removed, `other` gets the slot on any node.
      const limited = await newKey(c.call, token, productId, { activation_limit: 1 })
      for (const node of c.nodes) expect((await validate(node, limited.key_value, device)).body.valid).toBe(true)
      const activationId = (await c.call('GET', `/v1/keys/${limited.id}`, { token })).body.activations[0].id
      changes.push({
        kind: 'activation removal',
        write: async (node) => (await node.call('DELETE', `/v1/keys/${limited.id}/activations/${activationId}`, { token })).status,
        stale: async (node) => (await validate(node, limited.key_value, other)).body.reason === 'activation_limit',
      })

      const created = await c.call('POST', '/v1/api-keys', { token, body: { name: `doomed ${i}`, scope: 'validate' } })
      const { id: apiKeyId, token: doomed } = created.body
      changes.push({
        kind: 'API-key deletion',
        write: async (node) => (await node.call('DELETE', `/v1/api-keys/${apiKeyId}`, { token })).status,
        stale: async (node) => (await node.call('GET', '/v1/ping', { token: doomed })).status === 200,
      })
    }
    // Warm: every node holds the old state in memory (and answers it).
    for (const node of c.nodes) {
      for (const ch of changes) if (!(await ch.stale(node))) throw new Error(`warm-up: ${ch.kind} not in its old state`)
    }
    return changes
  }

  /**
   * Makes every change (the i-th on node i % 3, started `startAt(i)` ms from now) while every node is
   * asked about every change, until the degraded window + 1 s after the last write returned. Counts
   * old answers to requests sent after their write returned.
   */
  const run = async (phase: string, changes: Change[], startAt: (i: number) => number) => {
    const returnedAt = new Map<Change, number>()
    const stale = new Map<string, number>()
    let worst = 0
    let watching = true
    const watchers = c.nodes.flatMap((node) =>
      [0, 1].map(async (half) => {
        const mine = changes.filter((_, i) => i % 2 === half)
        while (watching) {
          for (const ch of mine) {
            const sent = performance.now()
            const old = await ch.stale(node)
            const at = returnedAt.get(ch)
            if (old && at !== undefined && sent > at) {
              stale.set(ch.kind, (stale.get(ch.kind) ?? 0) + 1)
              worst = Math.max(worst, sent - at)
            }
          }
        }
      }),
    )
    const t0 = performance.now()
    const durations: number[] = []
    const statuses = await Promise.all(
      changes.map(async (ch, i) => {
        await Bun.sleep(Math.max(0, startAt(i) - (performance.now() - t0)))
        const began = performance.now()
        const status = await ch.write(c.nodes[i % 3]!)
        returnedAt.set(ch, performance.now())
        durations.push(performance.now() - began)
        return status
      }),
    )
    await Bun.sleep(DEGRADED_TTL_MS + 1000)
    watching = false
    await Promise.all(watchers)
    const total = [...stale.values()].reduce((a, b) => a + b, 0)
    console.log(
      `${phase}: ${total} old answers after the write returned ${JSON.stringify(Object.fromEntries(stale))}` +
        (total ? `, up to ${worst.toFixed(0)} ms after` : '') +
        `; writes took up to ${Math.max(...durations).toFixed(0)} ms (degraded window ${DEGRADED_TTL_MS} ms)`,
    )
    for (const s of statuses) expect([200, 204]).toContain(s)
    expect(total).toBe(0)
  }

  test('NATS stopped: every change is in force on every node when its call returns', async () => {
    const changes = await prepare()
    await c.nats.stop()
    await waitFor('every node to see the bus down', async () => (await natsStates()).every((s) => s === 'down'))
    try {
      await run('NATS stopped', changes, (i) => i * 50)
    } finally {
      await c.nats.start()
      await allUp()
    }
  }, 90_000)

  test('right after a NATS restart: every change is in force on every node when its call returns', async () => {
    const changes = await prepare()
    await c.nats.stop()
    await waitFor('every node to see the bus down', async () => (await natsStates()).every((s) => s === 'down'))
    await Bun.sleep(300)
    await c.nats.start()
    // the writes start 0.2 s to 1.3 s after the server is back (the fault was seen at 0.3-0.7 s)
    await run('right after a NATS restart', changes, (i) => 200 + i * 100)
    await allUp()
  }, 90_000)

  test('one node silently cut off from NATS: every change is in force on every node when its call returns', async () => {
    await allUp()
    const changes = await prepare()
    const cutOff = c.nodes[2]!
    cutOff.nats!.pause()
    try {
      await run('one node cut off from NATS (paused)', changes, (i) => i * 50)
    } finally {
      cutOff.nats!.resume()
    }
    await allUp()
  }, 90_000)
})

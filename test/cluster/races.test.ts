// Races spread across three real node processes: the last activation slot and the daily quota hold
// exactly, whichever nodes the requests land on.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey, newProduct } from '../support/harness'
import { fingerprint, pool, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/races')

describe.if(ready)('races across three nodes', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3)
  }, 60_000)
  afterAll(() => c?.close())

  test('N devices racing for the slots of a key on three nodes: exactly activation_limit activations', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    for (const limit of [1, 3, 5]) {
      for (let round = 0; round < 4; round++) {
        const key = await newKey(c.call, token, product.id, { activation_limit: limit })
        // every node knows the key (cached) before the race
        const warmDevice = fingerprint(999)
        for (const node of c.nodes) await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: warmDevice } })
        // that warm-up took a slot: release it so the race is for all `limit` slots
        const detail = await c.call('GET', `/v1/keys/${key.id}`, { token })
        await c.call('DELETE', `/v1/keys/${key.id}/activations/${detail.body.activations[0].id}`, { token })
        const devices = Array.from({ length: 24 }, (_, i) => fingerprint(i))
        const answers = await Promise.all(
          devices.map((d, i) => c.nodes[i % 3]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: d } })),
        )
        expect(answers.every((a) => a.status === 200)).toBe(true)
        expect(answers.filter((a) => a.body.valid === true).length).toBe(limit)
        expect(answers.filter((a) => a.body.reason === 'activation_limit').length).toBe(24 - limit)
        const after = await c.call('GET', `/v1/keys/${key.id}`, { token })
        expect(after.body.activations_used).toBe(limit)
      }
    }
  }, 60_000)

  test('a Free account validating across three nodes: exactly 500 of 600 calls succeed', async () => {
    const { token } = await c.account('free')
    const product = await newProduct(c.call, token)
    const key = await newKey(c.call, token, product.id)
    const device = fingerprint(1)
    const answers = await pool(Array.from({ length: 600 }), 30, (_, i) =>
      c.nodes[i % 3]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } }),
    )
    const ok = answers.filter((a) => a.status === 200).length
    const limited = answers.filter((a) => a.status === 429)
    console.log(`Free plan over three nodes: ${ok} answered, ${limited.length} rate limited`)
    expect(ok).toBe(500)
    expect(limited.length).toBe(100)
    expect(limited[0]!.body.code).toBe('rate_limited')
    expect(limited[0]!.body.retry_after).toBeGreaterThan(0)
    // still refused on every node afterwards
    for (const node of c.nodes) {
      expect((await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).status).toBe(429)
    }
  }, 60_000)
})

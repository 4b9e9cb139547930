// Relay seats across three real node processes (docs/api.md, "Relays"): cloud devices and relays
// racing for one key's seats never hold more than its activation_limit, whichever nodes the calls
// land on; a relay's seats, and their return on delete, are in force on every node when the call returns.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { fingerprint, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { createRelay, relayIdentity, requestCode } from '../support/relays'

const ready = await requireCluster('cluster/relay-seats')

describe.if(ready)('relay seats across three nodes', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3)
  }, 90_000)
  afterAll(() => c?.close())

  test('devices and relays racing for the seats of a key on three nodes: never more than activation_limit', async () => {
    const { token, productId } = await c.tenant()
    for (const limit of [3, 6, 10]) {
      for (let round = 0; round < 3; round++) {
        const key = await newKey(c.call, token, productId, { activation_limit: limit })
        // every node holds the key in memory before the race
        for (const node of c.nodes) await node.call('GET', `/v1/keys/${key.id}`, { token })
        const warm = fingerprint(999)
        for (const node of c.nodes) await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: warm } })
        const detail0 = await c.call('GET', `/v1/keys/${key.id}`, { token })
        await c.call('DELETE', `/v1/keys/${key.id}/activations/${detail0.body.activations[0].id}`, { token })

        const relays = Array.from({ length: 6 }, () => relayIdentity())
        const seatsOf = (i: number) => 1 + (i % 3)
        const devices = Array.from({ length: 18 }, (_, i) => fingerprint(i))
        const calls = [
          ...relays.map((r, i) => () =>
            c.nodes[i % 3]!.call('POST', `/v1/keys/${key.id}/relays`, { token, body: { request: requestCode(r), seats: seatsOf(i) } }).then((res) => ({ kind: 'relay' as const, i, res }))),
          ...devices.map((d, i) => () =>
            c.nodes[(i + 1) % 3]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: d } }).then((res) => ({ kind: 'device' as const, i, res }))),
        ].sort(() => Math.random() - 0.5)
        const results = await Promise.all(calls.map((f) => f()))

        let granted = 0
        for (const r of results) {
          if (![200, 201, 409].includes(r.res.status)) throw new Error(`${r.kind} ${r.i}: ${r.res.status} ${JSON.stringify(r.res.body)}`)
          if (r.kind === 'relay') {
            expect([201, 409]).toContain(r.res.status)
            if (r.res.status === 201) granted += seatsOf(r.i)
            else expect(r.res.body.code).toBe('activation_limit')
          } else {
            expect(r.res.status).toBe(200)
            if (r.res.body.valid) granted += 1
            else expect(r.res.body.reason).toBe('activation_limit')
          }
        }
        expect(granted).toBeLessThanOrEqual(limit)
        const [row] = await c.sql<{ devices: number; relay_seats: number }[]>`select
            (select count(*)::int from activations where key_id = ${key.id} and status = 'active') as devices,
            (select coalesce(sum(seats), 0)::int from relays where key_id = ${key.id} and deleted_at is null) as relay_seats`
        expect({ limit, round, taken: row!.devices + row!.relay_seats }).toEqual({ limit, round, taken: granted })
        expect(row!.devices + row!.relay_seats).toBeLessThanOrEqual(limit)
        // every node answers with the same count, and refuses a new device if the key is full
        for (const node of c.nodes) {
          const d = await node.call('GET', `/v1/keys/${key.id}`, { token })
          expect({ node: node.url, used: d.body.activations_used }).toEqual({ node: node.url, used: granted })
        }
      }
    }
  }, 120_000)

  test("a relay's seats and their return are in force on every node when the call returns", async () => {
    const { token, productId } = await c.tenant()
    const key = await newKey(c.call, token, productId, { activation_limit: 3 })
    const device = fingerprint(1)
    // every node knows the key and its one device
    for (const node of c.nodes) {
      const v = await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })
      expect(v.body).toMatchObject({ valid: true, activations_used: 1 })
    }
    const made = await createRelay(c.nodes[0]!.call, token, key.id, { request: requestCode(relayIdentity()), seats: 2 })
    expect(made.status).toBe(201)
    for (const node of c.nodes) {
      expect((await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).body.activations_used).toBe(3)
      expect((await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fingerprint(50) } })).body).toEqual({
        valid: false,
        reason: 'activation_limit',
      })
    }
    expect((await c.nodes[1]!.call('DELETE', `/v1/relays/${made.body.relay_id}`, { token })).status).toBe(204)
    for (const node of c.nodes) {
      expect((await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).body.activations_used).toBe(1)
    }
  }, 60_000)
})

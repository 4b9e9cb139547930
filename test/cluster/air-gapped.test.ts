// Air-gapped activation across three real node processes (docs/api.md, "Air-gapped activation"): one
// request code sent to every node at once takes exactly one seat (one 201, the others 200 with the
// same activation), and its deactivation code sent to every node at once releases it once (one
// count, one receipt time), after which no node answers valid for the device.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { newKey } from '../support/harness'
import { startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { deactivationCode, licenseOfResponse, newDevice, receiptOf, requestCode } from '../support/air-gapped'
import { payloadOf } from '../support/offline'

const ready = await requireCluster('cluster/air-gapped')

describe.if(ready)('air-gapped codes across three nodes', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3)
  }, 120_000)
  afterAll(() => c?.close())

  test('one request code sent to every node at once: exactly one 201, one seat; its deactivation on every node: released once', async () => {
    const { token, productId } = await c.tenant()
    for (let round = 0; round < 5; round++) {
      const key = await newKey(c.call, token, productId, { activation_limit: 2 })
      const device = newDevice()
      const { code } = requestCode(device, key.key_value)
      // each node sends the code twice, all at once
      const answers = await Promise.all(
        [...c.nodes, ...c.nodes].map((n) => n.call('POST', '/v1/offline/activations', { token, body: { request: code } })),
      )
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 201])
      const ids = new Set(answers.map((a) => a.body.activation_id))
      expect(ids.size).toBe(1)
      const licenseIds = new Set(answers.map((a) => payloadOf(licenseOfResponse(a.body.response)).id))
      expect(licenseIds.size).toBe(1)
      const [{ n }] = await c.sql`select count(*)::int as n from activations where key_id = ${key.id}`
      expect(n).toBe(1)
      // every node answers valid for the device (the seat was announced)
      for (const node of c.nodes) {
        const v = await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device.fingerprint } })
        expect(v.body).toMatchObject({ valid: true, activations_used: 1 })
      }

      const dea = deactivationCode(device, { activation_id: [...ids][0]!, license_id: [...licenseIds][0]! })
      const released = await Promise.all(c.nodes.map((n) => n.call('POST', '/v1/offline/deactivations', { token, body: { code: dea } })))
      expect(released.map((r) => r.status)).toEqual([200, 200, 200])
      expect(released.every((r) => r.body.released === true)).toBe(true)
      expect(new Set(released.map((r) => receiptOf(r.body.receipt).body.released_at)).size).toBe(1)
      const [k] = await c.sql`select deactivations_used from license_keys where id = ${key.id}`
      expect(k.deactivations_used).toBe(1)
      // in force on every node before the answers returned: no node still holds the device's seat
      for (const node of c.nodes) {
        const d = await node.call('POST', '/v1/devices', { token, body: { key: key.key_value } })
        expect(d.body.devices).toEqual([])
      }
      // and the code, sent again anywhere: 409
      for (const node of c.nodes) {
        const again = await node.call('POST', '/v1/offline/activations', { token, body: { request: code } })
        expect(again.status).toBe(409)
        expect(again.body.code).toBe('request_used')
      }
    }
  }, 120_000)
})

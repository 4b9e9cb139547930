// The client's machine identity against a real node (docs/integrating.md, "Identifying machines"): the
// SDK sends machineIdentity()'s components by default and the node stores them; with component_match
// on, a copy of the device (same fingerprint, other components) is refused device_mismatch, a new
// fingerprint whose components match rebinds the same seat (and the old fingerprint is refused from
// then on), and an offline license issued with components verifies only where they match.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint as randomFingerprint, newKey, useHarness } from '../support/harness'
import { Keyward, machineIdentity, memoryStorage, type KeywardOptions } from '../../client/src/index.ts'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let publicKey: { raw: string }
beforeAll(async () => {
  ;({ token, validateToken, productId, publicKey } = await vendorOn(h))
})

const sdk = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, rootPublicKey: publicKey.raw, productId, storage: memoryStorage(), retries: 0, ...opts })
const key = (extra: Record<string, unknown> = {}) => newKey(h.call, token, productId, extra) as Promise<{ id: string; key_value: string }>
const detail = async (id: string) => (await h.call('GET', `/v1/keys/${id}`, { token })).body
const hx = (c: string) => c.repeat(64)
const S = { machine_id: hx('1'), disk: hx('2'), mac: hx('3'), cpu: hx('4'), hostname: hx('5') }

test('by default the SDK sends this machine\'s components; the node stores them on the activation (rule off: nothing else changes)', async () => {
  const k = await key()
  const own = await machineIdentity({ productId })
  expect(await sdk().validate({ key: k.key_value })).toMatchObject({ valid: true })
  const a = (await detail(k.id)).activations[0]
  expect(a.device_fingerprint).toBe(own.fingerprint)
  expect(a.components).toEqual(own.components)
})

test('rule most: a clone (same fingerprint, other components) is refused device_mismatch; a reinstall (new fingerprint, most components) rebinds the seat', async () => {
  const k = await key({ component_match: 'most', activation_limit: 1 })
  const fp = randomFingerprint()
  expect(await sdk({ fingerprint: fp, components: S }).validate({ key: k.key_value })).toMatchObject({ valid: true })
  const clone = { machine_id: hx('1'), disk: hx('8'), mac: hx('9'), cpu: hx('4'), hostname: hx('7') }
  expect(await sdk({ fingerprint: fp, components: clone }).validate({ key: k.key_value })).toMatchObject({ valid: false, reason: 'device_mismatch' })
  expect(await sdk({ fingerprint: fp, components: false }).validate({ key: k.key_value })).toMatchObject({ valid: false, reason: 'device_mismatch' })
  // A reinstall: new machine id, so a new fingerprint; disk, MAC, CPU and hostname the same.
  const reinstalled = { ...S, machine_id: hx('6') }
  const fp2 = randomFingerprint()
  expect(await sdk({ fingerprint: fp2, components: reinstalled }).validate({ key: k.key_value })).toMatchObject({ valid: true, activationsUsed: 1 })
  const d = await detail(k.id)
  const active = d.activations.filter((a: { status: string }) => a.status === 'active')
  expect(active).toHaveLength(1)
  expect(active[0]).toMatchObject({ device_fingerprint: fp2, components: reinstalled, replaced_fingerprints: [fp] })
  // The replaced fingerprint is refused from then on, whatever it sends.
  expect(await sdk({ fingerprint: fp, components: S }).validate({ key: k.key_value })).toMatchObject({ valid: false, reason: 'device_mismatch' })
  const events = (await h.call('GET', `/v1/events?type=activation.rebound&resource_id=${k.id}`, { token })).body.data
  expect(events[0].data).toMatchObject({ key_id: k.id, previous_fingerprint: fp, activation: { device_fingerprint: fp2 } })
})

test('an offline license issued with components and the rule verifies on the device only while they match', async () => {
  const k = await key({ component_match: 'most' })
  const fp = randomFingerprint()
  const res = await h.call('POST', `/v1/keys/${k.id}/offline-licenses`, { token, body: { device_fingerprint: fp, components: S, ttl_seconds: 86_400 } })
  expect(res.status).toBe(201)
  expect(await sdk({ fingerprint: fp, components: { ...S, disk: hx('9') } }).verifyLicense(res.body.license)).toMatchObject({ valid: true })
  expect(await sdk({ fingerprint: fp, components: { machine_id: hx('1'), cpu: hx('4'), disk: hx('0') } }).verifyLicense(res.body.license)).toMatchObject({ valid: false, reason: 'device_mismatch' })
})

// The client sends the device's components (machineIdentity(), or the app's own) with validate, devices
// and its own deactivate, and verifyLicense applies a license's component_match to the device's current
// components (docs/integrating.md, "Identifying machines"), against the fake signing server.
import { afterAll, beforeAll, beforeEach, expect, setDefaultTimeout, test } from 'bun:test'
import { Keyward, machineIdentity, memoryStorage, type FetchLike, type KeywardOptions } from '../src/index.ts'
import { ACCOUNT, startFakeServer, type FakeServer } from './support/fake-server'

setDefaultTimeout(30_000)

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const h = (c: string) => c.repeat(64)
let fake: FakeServer
beforeAll(() => {
  fake = startFakeServer()
})
afterAll(() => fake.stop())
beforeEach(() => {
  fake.mode = 'ok'
  fake.script = []
  fake.requests = []
  fake.devices = []
  fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
})

const client = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: fake.url, token: 'kw_test', rootPublicKey: fake.publicKeyRaw, productId: 'prod_L', backoffMs: 1, retries: 0, storage: memoryStorage(), ...opts })
const offline: FetchLike = async () => {
  throw new TypeError('fetch failed: no network')
}

test('by default the derived fingerprint and machineIdentity() components go with validate, devices and this device\'s deactivate', async () => {
  const own = await machineIdentity({ productId: 'prod_L' })
  const kw = client()
  expect(await kw.fingerprint()).toBe(own.fingerprint)
  expect(await kw.components()).toEqual(own.components)
  await kw.validate({ key: KEY })
  await kw.devices()
  await kw.deactivate()
  await kw.deactivate(h('e'))
  const bodies = fake.requests.map((r) => r.body as Record<string, unknown>)
  expect(bodies[0]).toEqual({ key: KEY, device_fingerprint: own.fingerprint, product_id: 'prod_L', components: own.components })
  expect(bodies[1]).toEqual({ key: KEY, product_id: 'prod_L', components: own.components })
  expect(bodies[2]).toEqual({ key: KEY, device_fingerprint: own.fingerprint, components: own.components })
  expect(bodies[3]).toEqual({ key: KEY, device_fingerprint: h('e') }) // another device's release: its components are not known here
})

test('the app\'s own components; false sends none; an own fingerprint sends none unless given; bad ones throw before any request', async () => {
  await client({ components: { machine_id: h('A'), container: h('b') } }).validate({ key: KEY })
  await client({ components: false }).validate({ key: KEY })
  await client({ fingerprint: h('f') }).validate({ key: KEY })
  await client({ fingerprint: h('f'), components: { container: h('c') } }).validate({ key: KEY })
  const sent = fake.requests.map((r) => (r.body as Record<string, unknown>).components)
  expect(sent).toEqual([{ machine_id: h('a'), container: h('b') }, undefined, undefined, { container: h('c') }])
  expect(() => client({ components: { Disk: h('a') } })).toThrow(TypeError)
  expect(() => client({ components: { disk: 'xyz' } })).toThrow(/components\.disk/)
  expect(() => client({ components: {} })).toThrow(TypeError)
})

test('verifyLicense: a license with components and a rule verifies only on a device whose components match under it', async () => {
  const now = Date.now()
  const FP = h('a')
  const stored = { machine_id: h('1'), disk: h('2'), mac: h('3'), cpu: h('4') }
  const base = { v: 2, kid: fake.kid, id: 'lic_1', account_id: ACCOUNT, key_id: 'key_1', product_id: 'prod_L', plan: 'pro', device_fingerprint: FP, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3_600_000).toISOString() }
  const device = (components: Record<string, string> | false) => client({ fingerprint: FP, components, fetch: offline })
  const newDisk = { ...stored, disk: h('9') }
  const clone = { machine_id: h('1'), disk: h('8'), mac: h('7'), cpu: h('4') } // a cloned image: same machine id and CPU, new disk and MAC
  const cases: [string, Record<string, unknown>, Record<string, string> | false, string][] = [
    ['rule most, same device', { components: stored, component_match: 'most' }, stored, 'valid'],
    ['rule most, a new disk', { components: stored, component_match: 'most' }, newDisk, 'valid'],
    ['rule most, a clone', { components: stored, component_match: 'most' }, clone, 'device_mismatch'],
    ['rule two, a clone', { components: stored, component_match: 'two' }, clone, 'valid'],
    ['rule all, a new disk', { components: stored, component_match: 'all' }, newDisk, 'device_mismatch'],
    ['rule any, nothing in common', { components: stored, component_match: 'any' }, { container: h('c') }, 'device_mismatch'],
    ['rule on, the app sends no components', { components: stored, component_match: 'any' }, false, 'device_mismatch'],
    ['rule off', { components: stored, component_match: 'off' }, clone, 'valid'],
    ['no rule in the license (issued before components)', {}, clone, 'valid'],
    ['rule on, issued without components', { components: null, component_match: 'all' }, clone, 'valid'],
    ['a rule this client does not know', { components: stored, component_match: 'some' }, stored, 'malformed'],
    ['malformed components', { components: { Bad: 'x' }, component_match: 'any' }, stored, 'malformed'],
  ]
  const got = []
  for (const [name, extra, components] of cases) {
    const r = await device(components).verifyLicense(fake.license({ ...base, ...extra }))
    got.push([name, r.valid ? 'valid' : r.reason])
  }
  expect(got).toEqual(cases.map(([name, , , want]) => [name, want]))
  // A wrong fingerprint stays wrong_device whatever the components.
  const other = await client({ fingerprint: h('b'), components: stored, fetch: offline }).verifyLicense(fake.license({ ...base, components: stored, component_match: 'any' }))
  expect(other).toMatchObject({ valid: false, reason: 'wrong_device' })
})

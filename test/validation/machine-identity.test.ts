// Machine identity on one node (docs/integrating.md, "Identifying machines"): components on validate,
// deactivate, devices and offline licenses; the component_match rule (match, drift, device_mismatch,
// replaced fingerprints, rebind with its event, the tie rule, the cap of 8); bad input is a 400 that
// changes nothing; with the rule off components are stored and change no answer.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { appClient, newProduct, useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { payloadOf } from '../support/offline'
import { events, fingerprint, setup, validate } from './support'

setDefaultTimeout(60_000)
const h = useHarness()

const hash = () => randomBytes(32).toString('hex')
/** A machine's components: machine_id, disk, board, mac, cpu with fresh hashes. */
const machine = (): Record<string, string> => ({ machine_id: hash(), disk: hash(), board: hash(), mac: hash(), cpu: hash() })

type Row = { id: string; device_fingerprint: string; status: string; components: Record<string, string> | null; replaced_fingerprints: string[]; components_changed_at: Date | null; activated_at: Date }
const rows = (keyId: string) =>
  h.node.deps.sql<Row[]>`select id, device_fingerprint, status, components, replaced_fingerprints, components_changed_at, activated_at
    from activations where key_id = ${keyId} order by activated_at, id`

async function identityKey(rule: string, over: Record<string, unknown> = {}) {
  return setup(h, { activation_limit: 2, component_match: rule, ...over })
}

test('rule off: components are stored (latest), shown on the activation, and change no answer', async () => {
  const { token, key } = await setup(h, { activation_limit: 1 })
  expect(key).toMatchObject({ component_match: 'off' })
  const fp = fingerprint()
  const c1 = machine()
  const upper = Object.fromEntries(Object.entries(c1).map(([n, v]) => [n, v.toUpperCase()]))
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: upper })).body.valid).toBe(true)
  let [a] = await rows(key.id)
  expect(a!.components).toEqual(c1) // stored lower-cased
  expect(a!.components_changed_at).not.toBeNull()
  // entirely different components: still valid (the rule is off); the stored set follows the latest
  const c2 = machine()
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: c2 })).body.valid).toBe(true)
  // none sent: valid, and the stored set is kept
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: null })).body.valid).toBe(true)
  await h.node.deps.validation.flush()
  ;[a] = await rows(key.id)
  expect(a!.components).toEqual(c2)
  // another machine with the same components and a new fingerprint is not a rebind: the key is full
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fingerprint(), components: c2 })).body).toEqual({ valid: false, reason: 'activation_limit' })
  // the activation object: key detail and /v1/devices
  const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
  expect(detail.body.activations[0]).toMatchObject({ components: c2, replaced_fingerprints: [] })
  expect(typeof detail.body.activations[0].components_changed_at).toBe('string')
  const devices = await h.call('POST', '/v1/devices', { token, body: { key: key.key_value, components: c2 } })
  expect(devices.status).toBe(200)
  expect(devices.body.devices[0]).toMatchObject({ device_fingerprint: fp, components: c2, replaced_fingerprints: [] })
})

test('bad components are a 400 naming the field on both doors, on deactivate and devices, and change nothing', async () => {
  const { token, key, accountId } = await identityKey('off')
  const held = fingerprint()
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: held })).body.valid).toBe(true)
  const seventeen = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, hash()]))
  const cases: [unknown, string][] = [
    [seventeen, 'body.components'],
    [{}, 'body.components'],
    [{ Disk: hash() }, 'body.components'],
    [{ '1disk': hash() }, 'body.components'],
    [{ ['a'.repeat(33)]: hash() }, 'body.components'],
    [{ disk: 'abc' }, 'body.components.disk'],
    [{ disk: hash() + '0' }, 'body.components.disk'],
    [{ disk: 'g'.repeat(64) }, 'body.components.disk'],
    [{ disk: 7 }, 'body.components.disk'],
    [[hash()], 'body.components'],
    ['machine', 'body.components'],
  ]
  const doors = [h.call, appClient(h.node)]
  for (const [components, field] of cases) {
    for (const call of doors) {
      for (const [path, body] of [
        ['/v1/validate', { key: key.key_value, device_fingerprint: fingerprint(), components }],
        ['/v1/deactivate', { key: key.key_value, device_fingerprint: held, components }],
        ['/v1/devices', { key: key.key_value, components }],
      ] as const) {
        const res = await call('POST', path, { token, body })
        const problem = expectProblem(res, 400, 'invalid_request')
        expect(problem.errors[0].field.startsWith('body.components'), `${path} ${JSON.stringify(components).slice(0, 40)}`).toBe(true)
        if (path === '/v1/validate' && typeof components === 'object' && components !== null && !Array.isArray(components) && Object.keys(components).length === 1) {
          expect(problem.errors[0].field).toBe(field)
        }
      }
    }
  }
  // nothing changed: one activation (the held device's, still active, no components), nothing counted
  const all = await rows(key.id)
  expect(all.map((r) => [r.device_fingerprint, r.status, r.components])).toEqual([[held, 'active', null]])
  await h.node.deps.validation.flush()
  const [counted] = await h.node.deps.sql<{ n: number }[]>`select coalesce(sum(valid + device_mismatch + activation_limit), 0)::int as n
    from analytics_daily_validations where account_id = ${accountId}`
  expect(counted!.n).toBe(1)
  // well-formed components on deactivate and devices are accepted (form only)
  const ok = machine()
  expect((await h.call('POST', '/v1/devices', { token, body: { key: key.key_value, components: ok } })).status).toBe(200)
  const off = await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: held, components: ok } })
  expect(off.body.deactivated).toBe(true)
})

test('rule on: match and drift are valid, a mismatch or missing components is device_mismatch and records nothing', async () => {
  const { token, key, accountId } = await identityKey('two')
  expect(key).toMatchObject({ component_match: 'two' })
  const fp = fingerprint()
  const c = machine()
  // with the rule on, a new device without components is refused before any seat is taken
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body).toEqual({ valid: false, reason: 'device_mismatch' })
  expect((await rows(key.id)).length).toBe(0)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: c })).body).toMatchObject({ valid: true, activations_used: 1 })
  const [first] = await rows(key.id)
  expect(first!.components).toEqual(c)
  // drift: two of five changed (three still match, two needed) → valid; the stored set follows
  const drifted = { ...c, disk: hash(), mac: hash() }
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: drifted })).body.valid).toBe(true)
  // from memory, the next comparison is against the drifted set: only machine_id left of the first
  const further = { machine_id: c.machine_id, disk: drifted.disk, board: hash(), mac: hash(), cpu: hash() }
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: further })).body.valid).toBe(true)
  await h.node.deps.validation.flush()
  const [after] = await rows(key.id)
  expect(after!.components).toEqual(further)
  expect(after!.id).toBe(first!.id)
  // mismatch (one of five) and no components: device_mismatch, nothing recorded
  const clone = { machine_id: further.machine_id, disk: hash(), board: hash(), mac: hash(), cpu: hash() }
  for (const components of [clone, undefined, null]) {
    const res = await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, ...(components === undefined ? {} : { components }) })
    expect(res.body).toEqual({ valid: false, reason: 'device_mismatch' })
  }
  await h.node.deps.validation.flush()
  const [still] = await rows(key.id)
  expect(still!.components).toEqual(further)
  expect((await rows(key.id)).length).toBe(1)
  // counted by outcome, in the daily quota's analytics
  const res = await h.call('GET', '/v1/analytics/validations?range=7d', { token })
  expect(res.status).toBe(200)
  const today = res.body[res.body.length - 1]
  expect(today.device_mismatch).toBe(4)
  void accountId
})

test('rebind: a new fingerprint whose components match takes the activation over; the old one is refused', async () => {
  const { token, key, product } = await identityKey('most')
  const old = fingerprint()
  const c = machine()
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: old, components: c, device_name: 'Office PC' })).body.valid).toBe(true)
  const [before] = await rows(key.id)
  // a reinstall: new fingerprint, three of five components the same
  const fresh = fingerprint()
  const after = { ...c, disk: hash(), mac: hash() }
  const res = await validate(h.call, token, { key: key.key_value, device_fingerprint: fresh, components: after, device_name: 'ignored' })
  expect(res.body).toMatchObject({ valid: true, activations_used: 1 })
  const all = await rows(key.id)
  expect(all.length).toBe(1)
  expect(all[0]).toMatchObject({ id: before!.id, device_fingerprint: fresh, status: 'active', components: after, replaced_fingerprints: [old] })
  expect(all[0]!.activated_at.getTime()).toBe(before!.activated_at.getTime())
  const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
  expect(detail.body.activations[0]).toMatchObject({ id: before!.id, device_name: 'Office PC', device_fingerprint: fresh, replaced_fingerprints: [old] })
  // the event, with the activation object of the other activation events
  const rebound = await events(h.node.deps.sql, 'activation.rebound', key.id)
  expect(rebound.length).toBe(1)
  expect(rebound[0]!.data).toMatchObject({ key_id: key.id, product_id: product.id, previous_fingerprint: old })
  expect(rebound[0]!.data.activation).toMatchObject({ id: before!.id, device_fingerprint: fresh, replaced_fingerprints: [old], components: after })
  const listed = await h.call('GET', `/v1/events?type=activation.rebound`, { token })
  expect(listed.status).toBe(200)
  expect(listed.body.data[0].actor.type).toBe('device')
  // 6b: the replaced fingerprint is refused, even with matching components (the losing clone)
  for (const components of [c, after]) {
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: old, components })).body).toEqual({ valid: false, reason: 'device_mismatch' })
  }
  // the new fingerprint is a known device now, answered from memory
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fresh, components: after })).body.valid).toBe(true)
  // a machine that matches nothing takes the free seat; once full, one more is activation_limit
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fingerprint(), components: machine() })).body.activations_used).toBe(2)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fingerprint(), components: machine() })).body).toEqual({ valid: false, reason: 'activation_limit' })
  expect((await rows(key.id)).length).toBe(2)
})

test('replaced fingerprints: newest first, at most 8; one that dropped out is a new fingerprint again', async () => {
  const { token, key } = await identityKey('any', { activation_limit: 1 })
  const c = machine()
  const fps = Array.from({ length: 10 }, () => fingerprint())
  for (const fp of fps) expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, components: c })).body.valid).toBe(true)
  const [a] = await rows(key.id)
  expect(a!.device_fingerprint).toBe(fps[9]!)
  expect(a!.replaced_fingerprints).toEqual(fps.slice(1, 9).reverse())
  expect((await events(h.node.deps.sql, 'activation.rebound', key.id)).length).toBe(9)
  // fps[1] is still listed: refused; fps[0] dropped out: matching components rebind it again
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fps[1]!, components: c })).body.reason).toBe('device_mismatch')
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fps[0]!, components: c })).body.valid).toBe(true)
  const [b] = await rows(key.id)
  expect(b!.device_fingerprint).toBe(fps[0]!)
  expect(b!.replaced_fingerprints).toEqual([fps[9]!, ...fps.slice(2, 9).reverse()])
  // a dropped-out fingerprint with components that match nothing, on a full key: activation_limit
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fingerprint(), components: machine() })).body.reason).toBe('activation_limit')
})

test('several matches: the most matching components, then the latest last_validated_at', async () => {
  const { token, key } = await identityKey('any', { activation_limit: 3 })
  const a = { machine_id: hash(), disk: hash(), cpu: hash() }
  const b = { machine_id: hash(), disk: hash(), cpu: hash() }
  const [fa, fb] = [fingerprint(), fingerprint()]
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fa, components: a })).body.valid).toBe(true)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fb, components: b })).body.valid).toBe(true)
  expect((await rows(key.id)).length).toBe(2)
  // one of a's, two of b's: b is taken over
  const n1 = fingerprint()
  const c1 = { machine_id: a.machine_id, disk: b.disk, cpu: b.cpu }
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: n1, components: c1 })).body.valid).toBe(true)
  let all = await rows(key.id)
  expect(all.find((r) => r.device_fingerprint === n1)!.replaced_fingerprints).toEqual([fb])
  expect(all.some((r) => r.device_fingerprint === fa)).toBe(true)
  // one each: the latest validated wins (fa validated last)
  const n1Components = all.find((r) => r.device_fingerprint === n1)!.components!
  await h.node.deps.sql`update activations set last_validated_at = now() - interval '1 hour' where key_id = ${key.id} and device_fingerprint = ${n1}`
  await h.node.deps.sql`update activations set last_validated_at = now() where key_id = ${key.id} and device_fingerprint = ${fa}`
  const n2 = fingerprint()
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: n2, components: { machine_id: hash(), disk: a.disk, cpu: c1.cpu } })).body.valid).toBe(true)
  all = await rows(key.id)
  expect(all.find((r) => r.device_fingerprint === n2)!.replaced_fingerprints).toEqual([fa])
  expect(all.find((r) => r.device_fingerprint === n1)!.components).toEqual(n1Components)
  expect(all.filter((r) => r.status === 'active').length).toBe(2)
})

test('the rule is inherited from the policy, overridden and reset on the key; turning it on applies at once', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const pol = await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Desktops', activation_limit: 2 } })
  expect(pol.body.component_match).toBe('off')
  const key = await h.call('POST', '/v1/keys', { token, body: { policy_id: pol.body.id } })
  expect(key.body.component_match).toBe('off')
  const fp = fingerprint()
  const c = machine()
  expect((await validate(h.call, token, { key: key.body.key_value, device_fingerprint: fp, components: c })).body.valid).toBe(true)
  // the policy turns it on (PUT/PATCH): the key inherits, its memory was read with the rule off
  const put = await h.call('PATCH', `/v1/policies/${pol.body.id}`, { token, body: { component_match: 'all' } })
  expect(put.body.component_match).toBe('all')
  expect((await h.call('GET', `/v1/keys/${key.body.id}`, { token })).body).toMatchObject({ component_match: 'all', overrides: {} })
  expect((await validate(h.call, token, { key: key.body.key_value, device_fingerprint: fp, components: { ...c, disk: hash() } })).body.reason).toBe('device_mismatch')
  expect((await validate(h.call, token, { key: key.body.key_value, device_fingerprint: fp, components: c })).body.valid).toBe(true)
  expect((await validate(h.call, token, { key: key.body.key_value, device_fingerprint: fp })).body.reason).toBe('device_mismatch')
  // the key overrides it off: components change no answer again
  const patched = await h.call('PATCH', `/v1/keys/${key.body.id}`, { token, body: { component_match: 'off' } })
  expect(patched.body).toMatchObject({ component_match: 'off', overrides: { component_match: 'off' } })
  expect((await validate(h.call, token, { key: key.body.key_value, device_fingerprint: fp, components: machine() })).body.valid).toBe(true)
  // reset: back to the policy's
  const reset = await h.call('PATCH', `/v1/keys/${key.body.id}`, { token, body: { reset: ['component_match'] } })
  expect(reset.body).toMatchObject({ component_match: 'all', overrides: {} })
  // bad values are 400
  expectProblem(await h.call('PATCH', `/v1/keys/${key.body.id}`, { token, body: { component_match: 'some' } }), 400)
  expectProblem(await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'x', component_match: 'three' } }), 400)
})

test('offline licenses carry components and component_match; the rule refuses a mismatch with 409', async () => {
  const { token, key } = await identityKey('most')
  const fp = fingerprint()
  const c = machine()
  const issued = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fp, components: c } })
  expect(issued.status).toBe(201)
  expect(issued.body.payload).toMatchObject({ components: c, component_match: 'most' })
  expect(payloadOf(issued.body.license)).toMatchObject({ components: c, component_match: 'most' })
  // the same device with a clone's components: 409 device_mismatch, nothing issued
  const clone = { ...c, machine_id: hash(), disk: hash(), board: hash() }
  expectProblem(await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fp, components: clone } }), 409, 'device_mismatch')
  expectProblem(await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint() } }), 409, 'device_mismatch')
  const bad = await h.call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: fingerprint(), components: { disk: 'x' } } })
  expect(expectProblem(bad, 400).errors[0].field).toBe('body.components.disk')
  const [n] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from offline_licenses where key_id = ${key.id}`
  expect(n!.n).toBe(1)
  // rule off: the license says so, and carries what was sent
  const off = await setup(h, {})
  const lic = await h.call('POST', `/v1/keys/${off.key.id}/offline-licenses`, { token: off.token, body: { device_fingerprint: fingerprint(), components: c } })
  expect(lic.body.payload).toMatchObject({ components: c, component_match: 'off' })
})

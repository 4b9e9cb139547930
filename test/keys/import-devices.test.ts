// one_key_per_device through the import: a device an imported key brings is recorded for its policy,
// as validate's claim records it, so no other key of the policy answers valid for it (any case of the
// fingerprint), on validate or an offline license; a device the policy already records for another
// key, or that two rows bring, is a bad row.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newProduct, useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'

setDefaultTimeout(60_000)

// a real socket: validate goes through the fast path, as customers' apps reach it
const h = useHarness()

async function trialPolicy(oneKeyPerDevice = true) {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const res = await h.call('POST', '/v1/policies', {
    token,
    body: { product_id: product.id, name: 'Trial', plan: 'trial', activation_limit: 1, one_key_per_device: oneKeyPerDevice },
  })
  expect(res.status).toBe(201)
  return { token, policy: res.body }
}
const validate = (token: string, key: string, device: string) => h.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })
const newKeyOf = async (token: string, policyId: string) => (await h.call('POST', '/v1/keys', { token, body: { policy_id: policyId } })).body
const importRows = (token: string, rows: unknown[]) => h.call('POST', '/v1/keys/import', { token, body: { rows } })

describe('import on a one_key_per_device policy', () => {
  test("an imported device is the policy's: another key of it is device_already_used, in any case of the fingerprint", async () => {
    const { token, policy } = await trialPolicy()
    const device = fingerprint()
    const imported = await importRows(token, [
      { key: 'TRIAL-IMPORTED-0001', policy_id: policy.id, activations: [{ device_fingerprint: device.toUpperCase() }] },
    ])
    expect(imported.status).toBe(201)
    const second = await newKeyOf(token, policy.id)
    expect((await validate(token, second.key_value, device)).body).toEqual({ valid: false, reason: 'device_already_used' })
    expect((await validate(token, second.key_value, device.toUpperCase())).body).toEqual({ valid: false, reason: 'device_already_used' })
    expectProblem(await h.call('POST', `/v1/keys/${second.id}/offline-licenses`, { token, body: { device_fingerprint: device.toUpperCase() } }), 409, 'device_already_used')
    // the imported key keeps its device; the second key still takes another one
    expect((await validate(token, 'TRIAL-IMPORTED-0001', device.toUpperCase())).body.valid).toBe(true)
    expect((await validate(token, second.key_value, fingerprint())).body.valid).toBe(true)
    const rows = await h.node.deps.sql<{ key_id: string; device_fingerprint: string }[]>`select key_id, device_fingerprint from policy_devices
      where policy_id = ${policy.id} and key_id = ${imported.body.keys[0].id}`
    expect([...rows]).toEqual([{ key_id: imported.body.keys[0].id, device_fingerprint: device }])
  })

  test('a device the policy records for another key, or on two rows of the file, is a bad row; nothing is imported', async () => {
    const { token, policy } = await trialPolicy()
    const device = fingerprint()
    const first = await newKeyOf(token, policy.id)
    expect((await validate(token, first.key_value, device)).body.valid).toBe(true)
    const taken = await importRows(token, [
      { key: 'TRIAL-TAKEN-0001', policy_id: policy.id, activations: [{ device_fingerprint: fingerprint() }, { device_fingerprint: device.toUpperCase() }] },
    ])
    expectProblem(taken, 422, 'import_invalid')
    expect(taken.body.rows).toEqual([
      { line: 1, external_id: null, errors: [{ field: 'activations.1.device_fingerprint', message: expect.stringContaining('one_key_per_device') }] },
    ])
    const other = fingerprint()
    const twice = await importRows(token, [
      { key: 'TRIAL-TWICE-0001', policy_id: policy.id, activations: [{ device_fingerprint: other }] },
      { key: 'TRIAL-TWICE-0002', policy_id: policy.id, external_id: 'b', activations: [{ device_fingerprint: other.toUpperCase() }] },
    ])
    expectProblem(twice, 422, 'import_invalid')
    expect(twice.body.rows.map((r: { line: number }) => r.line)).toEqual([2])
    const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from policy_devices where policy_id = ${policy.id}`
    expect(n).toBe(1)
  })

  test('a policy without one_key_per_device records nothing: one device may hold several of its keys', async () => {
    const { token, policy } = await trialPolicy(false)
    const device = fingerprint()
    const res = await importRows(token, [
      { key: 'PLAIN-0001', policy_id: policy.id, activations: [{ device_fingerprint: device }] },
      { key: 'PLAIN-0002', policy_id: policy.id, activations: [{ device_fingerprint: device }] },
    ])
    expect(res.status).toBe(201)
    expect((await validate(token, (await newKeyOf(token, policy.id)).key_value, device)).body.valid).toBe(true)
    const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from policy_devices where policy_id = ${policy.id}`
    expect(n).toBe(0)
  })
})

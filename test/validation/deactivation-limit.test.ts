// deactivations_allowed: the holder's releases (POST /v1/deactivate, reason user) are counted over the
// key's life, exactly under concurrency; past the cap a release is 409 deactivation_limit and changes
// nothing. Admin removals do not count.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { useHarness } from '../support/harness'
import { activationRows, events, fingerprint, setup, validate } from './support'

setDefaultTimeout(60_000)
const h = useHarness()

const allow = (keyId: string, n: number | null) => h.node.deps.sql`update license_keys set deactivations_allowed = ${n} where id = ${keyId}`
const used = async (keyId: string) =>
  (await h.node.deps.sql<{ n: number }[]>`select deactivations_used as n from license_keys where id = ${keyId}`)[0].n
const deactivate = (token: string, key: string, device: string) =>
  h.call('POST', '/v1/deactivate', { token, body: { key, device_fingerprint: device } })

async function keyWithDevices(n: number, allowed: number | null) {
  const s = await setup(h, { activation_limit: Math.max(n, 1) })
  const fps = Array.from({ length: n }, () => fingerprint())
  for (const fp of fps) expect((await validate(h.call, s.token, { key: s.key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
  await allow(s.key.id, allowed)
  return { ...s, fps }
}

test('6 parallel deactivations with 2 allowed: exactly 2 released, 4 refused with 409', async () => {
  const { token, key, fps } = await keyWithDevices(6, 2)
  const answers = await Promise.all(fps.map((fp) => deactivate(token, key.key_value, fp)))
  const released = answers.filter((a) => a.status === 200)
  const refused = answers.filter((a) => a.status === 409)
  expect(released).toHaveLength(2)
  expect(released.every((a) => a.body.deactivated === true && a.body.activation_limit === 6)).toBe(true)
  expect(refused).toHaveLength(4)
  for (const a of refused) {
    expect(a.body).toMatchObject({ code: 'deactivation_limit', status: 409, title: 'Deactivation limit reached' })
    expect(a.headers.get('content-type')).toContain('application/problem+json')
  }
  expect(await used(key.id)).toBe(2)
  const rows = await activationRows(h.node.deps.sql, key.id)
  expect(rows.filter((r) => r.status === 'active')).toHaveLength(4)
  expect(await events(h.node.deps.sql, 'activation.deactivated', key.id)).toHaveLength(2)
  // the refused devices still hold their slots and validate
  const stillActive = rows.filter((r) => r.status === 'active').map((r) => r.device_fingerprint)
  for (const fp of stillActive) expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
  // the holder sees the same counters
  expect((await h.call('POST', '/v1/devices', { token, body: { key: key.key_value } })).body).toMatchObject({
    activations_used: 4,
    deactivations_allowed: 2,
    deactivations_used: 2,
  })
})

test('past the cap, a device holding no slot answers deactivated: false, not 409', async () => {
  const { token, key, fps } = await keyWithDevices(2, 1)
  expect((await deactivate(token, key.key_value, fps[0])).body).toEqual({ deactivated: true, activations_used: 1, activation_limit: 2 })
  // released already, a stranger, and an unknown key: nothing would be released
  for (const [k, fp] of [
    [key.key_value, fps[0]],
    [key.key_value, fingerprint()],
    ['ABCDE-FGHJK-MNPQR-STVWX-YZ012', fps[1]],
  ]) {
    const res = await deactivate(token, k, fp)
    expect(res.status).toBe(200)
    expect(res.body.deactivated).toBe(false)
  }
  expect((await deactivate(token, key.key_value, fps[1])).status).toBe(409)
  expect(await used(key.id)).toBe(1)
})

test('0 allowed refuses every holder release; null allows any number', async () => {
  const none = await keyWithDevices(1, 0)
  const res = await deactivate(none.token, none.key.key_value, none.fps[0])
  expect(res.status).toBe(409)
  expect(res.body.code).toBe('deactivation_limit')
  expect(await used(none.key.id)).toBe(0)

  const open = await keyWithDevices(3, null)
  for (const fp of open.fps) expect((await deactivate(open.token, open.key.key_value, fp)).body.deactivated).toBe(true)
  expect(await used(open.key.id)).toBe(3) // counted even without a cap: a cap set later sees the history
})

test('admin removals do not count toward deactivations_allowed', async () => {
  const { token, key, fps } = await keyWithDevices(3, 1)
  const [first] = await activationRows(h.node.deps.sql, key.id)
  const removed = await h.call('DELETE', `/v1/keys/${key.id}/activations/${first.id}`, { token })
  expect(removed.body).toMatchObject({ status: 'deactivated', deactivation_reason: 'admin' })
  expect(removed.body).toHaveProperty('device_name', null)
  expect(await used(key.id)).toBe(0)
  expect((await deactivate(token, key.key_value, fps[1])).body.deactivated).toBe(true)
  expect(await used(key.id)).toBe(1)
  expect((await deactivate(token, key.key_value, fps[2])).status).toBe(409)
  // the admin may still remove the last one past the holder's cap
  const [, , last] = await activationRows(h.node.deps.sql, key.id)
  expect((await h.call('DELETE', `/v1/keys/${key.id}/activations/${last.id}`, { token })).status).toBe(200)
  expect(await used(key.id)).toBe(1)
})

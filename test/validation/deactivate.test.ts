// Deactivation by the device (POST /v1/deactivate, reason user) and by the admin
// (DELETE /v1/keys/:id/activations/:activation_id, reason admin): the slot is free at once, events
// are written, and the cached state of the key follows.
import { expect, test } from 'bun:test'
import { scopedToken, useHarness } from '../support/harness'
import { activationRows, events, fingerprint, setup, validate } from './support'

const h = useHarness()

test('deactivate / reactivate cycles free and retake the slot, one event each', async () => {
  const { token, key } = await setup(h, { activation_limit: 1 })
  const [a, b] = [fingerprint(), fingerprint()]
  const body = (device: string) => ({ key: key.key_value, device_fingerprint: device })
  for (let cycle = 0; cycle < 3; cycle++) {
    expect((await validate(h.call, token, body(a))).body).toMatchObject({ valid: true, activations_used: 1 })
    expect((await validate(h.call, token, body(b))).body).toEqual({ valid: false, reason: 'activation_limit' })
    const off = await h.call('POST', '/v1/deactivate', { token, body: body(a) })
    expect(off.status).toBe(200)
    expect(off.body).toEqual({ deactivated: true, activations_used: 0, activation_limit: 1 })
    // the slot is free at once: b gets it (a's cached state was dropped before the call returned)
    expect((await validate(h.call, token, body(b))).body).toMatchObject({ valid: true, activations_used: 1 })
    expect((await h.call('POST', '/v1/deactivate', { token, body: body(b) })).body.deactivated).toBe(true)
  }
  const rows = await activationRows(h.node.deps.sql, key.id)
  expect(rows).toHaveLength(6)
  expect(rows.every((r) => r.status === 'deactivated')).toBe(true)
  expect(await events(h.node.deps.sql, 'activation.created', key.id)).toHaveLength(6)
  const deactivated = await events(h.node.deps.sql, 'activation.deactivated', key.id)
  expect(deactivated).toHaveLength(6)
  expect(deactivated[0].data).toMatchObject({ key_id: key.id, activation: { status: 'deactivated', deactivation_reason: 'user' } })
})

test('deactivating what holds no slot answers deactivated:false and writes nothing', async () => {
  const { token, key } = await setup(h, { activation_limit: 4 })
  const holder = fingerprint()
  await validate(h.call, token, { key: key.key_value, device_fingerprint: holder })
  const stranger = await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: fingerprint() } })
  expect(stranger.body).toEqual({ deactivated: false, activations_used: 1, activation_limit: 4 })
  for (const unknown of ['ABCDE-FGHJK-MNPQR-STVWX-YZ012', 'nonsense']) {
    const res = await h.call('POST', '/v1/deactivate', { token, body: { key: unknown, device_fingerprint: holder } })
    expect(res.body).toEqual({ deactivated: false, activations_used: 0, activation_limit: 0 })
  }
  // another account cannot release our device
  const other = await setup(h)
  const foreign = await h.call('POST', '/v1/deactivate', { token: other.token, body: { key: key.key_value, device_fingerprint: holder } })
  expect(foreign.body.deactivated).toBe(false)
  expect((await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value } })).status).toBe(400)
  expect(await events(h.node.deps.sql, 'activation.deactivated', key.id)).toHaveLength(0)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: holder })).body.valid).toBe(true)
  // the validate scope may deactivate, others may not
  const validateOnly = await scopedToken(h.call, token, 'validate')
  expect((await h.call('POST', '/v1/deactivate', { token: validateOnly, body: { key: key.key_value, device_fingerprint: holder } })).body.deactivated).toBe(true)
  const writer = await scopedToken(h.call, token, 'keys:write')
  expect((await h.call('POST', '/v1/deactivate', { token: writer, body: { key: key.key_value, device_fingerprint: holder } })).status).toBe(403)
})

test('admin removal: reason admin, slot free at once, idempotent, 404 for what is not there', async () => {
  const { token, key } = await setup(h, { activation_limit: 1 })
  const [a, b] = [fingerprint(), fingerprint()]
  await validate(h.call, token, { key: key.key_value, device_fingerprint: a })
  const [row] = await activationRows(h.node.deps.sql, key.id)
  const path = `/v1/keys/${key.id}/activations/${row.id}`

  const reader = await scopedToken(h.call, token, 'keys:read')
  expect((await h.call('DELETE', path, { token: reader })).status).toBe(403)
  const writer = await scopedToken(h.call, token, 'keys:write')
  const removed = await h.call('DELETE', path, { token: writer })
  expect(removed.status).toBe(200)
  expect(removed.body).toMatchObject({ id: row.id, device_fingerprint: a, status: 'deactivated', deactivation_reason: 'admin' })
  expect(removed.body.deactivated_at).not.toBeNull()
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: b })).body).toMatchObject({ valid: true, activations_used: 1 })
  // the removed device no longer holds a slot
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a })).body).toEqual({ valid: false, reason: 'activation_limit' })

  const again = await h.call('DELETE', path, { token })
  expect(again.status).toBe(200)
  expect(again.body).toEqual(removed.body)
  const evts = await events(h.node.deps.sql, 'activation.deactivated', key.id)
  expect(evts).toHaveLength(1)
  expect(evts[0].data.activation.deactivation_reason).toBe('admin')

  const other = await setup(h)
  for (const [p, t] of [
    [`/v1/keys/${key.id}/activations/act_01JD7Z3X9K8Q4W2E6R5T1Y0U3A`, token],
    [`/v1/keys/${key.id}/activations/nonsense`, token],
    [`/v1/keys/key_01JD7Z3X9K8Q4W2E6R5T1Y0U3A/activations/${row.id}`, token],
    [`/v1/keys/${other.key.id}/activations/${row.id}`, other.token],
    [path, other.token],
  ] as const) {
    const res = await h.call('DELETE', p, { token: t })
    expect(res.status).toBe(404)
    expect(res.body.code).toBe('not_found')
  }
})

// Inactivity release (docs/api.md, "License keys"): activations idle for their key's release_after_seconds are
// deactivated with reason `inactive`, once, with one activation.deactivated event each, and the slot
// is free for the next device. Time passes by moving last_validated_at back in SQL (60 s is the
// smallest release_after_seconds the API takes). The node's own background jobs are slowed down here
// so that each test decides when a sweep or a last-seen flush happens; the background job itself is
// exercised by the cluster test (test/cluster/inactivity-release.test.ts).
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { Db } from '../../src/infra/db'
import { releaseInactiveActivations } from '../../src/modules/activations/inactivity-release'
import { realPostgres, useHarness } from '../support/harness'
import { activationRows, events, fingerprint, setup, validate } from '../validation/support'

setDefaultTimeout(60_000) // two shared cores: a slow start is not a failure

let other: Db | null = null
afterAll(() => other?.close()) // registered before the harness: closed before its database is dropped
const h = useHarness({ env: { SWEEP_INTERVAL_MS: '3600000', FLUSH_INTERVAL_MS: '3600000' } })
beforeAll(async () => {
  other = realPostgres ? await h.db.open() : null
}, 60_000)

const GRACE_MS = 2_000
const sweep = (sql = h.node.deps.sql, batch?: number) =>
  releaseInactiveActivations({ ...h.node.deps, sql }, { graceMs: GRACE_MS, batch })

/** Moves every active activation of the key `seconds` into the past (as if nothing validated since). */
async function idleFor(keyId: string, seconds: number) {
  await h.node.deps.sql`update activations set activated_at = now() - make_interval(secs => ${seconds}),
      last_validated_at = now() - make_interval(secs => ${seconds})
    where key_id = ${keyId} and status = 'active'`
}

const row = async (keyId: string, fp: string) =>
  h.node.deps.sql<{ status: string; deactivation_reason: string | null; last_validated_at: Date }[]>`
    select status, deactivation_reason, last_validated_at from activations
    where key_id = ${keyId} and device_fingerprint = ${fp} order by activated_at`

describe('inactivity release', () => {
  test('two sweeps at once: every idle activation is released once, one event each; others are kept', async () => {
    const { token, key } = await setup(h, { release_after_seconds: 60, activation_limit: 100 })
    const devices = Array.from({ length: 24 }, () => fingerprint())
    for (const d of devices) expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    // not due: a key that never releases, and a key whose window is longer than the idle time
    const never = await setup(h, { activation_limit: 5 })
    const longer = await setup(h, { release_after_seconds: 3600, activation_limit: 5 })
    const keptDevice = fingerprint()
    for (const k of [never, longer]) {
      expect((await validate(h.call, k.token, { key: k.key.key_value, device_fingerprint: keptDevice })).body.valid).toBe(true)
    }
    await h.node.deps.validation.flush()
    for (const id of [key.id, never.key.id, longer.key.id]) await idleFor(id, 600)

    // small batches so the sweeps interleave; on separate connections when Postgres is real
    const released = await Promise.all([sweep(h.node.deps.sql, 3), sweep(other?.sql ?? h.node.deps.sql, 3)])
    expect(released[0] + released[1]).toBe(devices.length)

    const rows = await activationRows(h.node.deps.sql, key.id)
    expect(rows).toHaveLength(devices.length)
    expect(rows.every((r) => r.status === 'deactivated')).toBe(true)
    const deactivated = await events(h.node.deps.sql, 'activation.deactivated', key.id)
    expect(deactivated).toHaveLength(devices.length)
    expect(new Set(deactivated.map((e) => e.data.activation.id)).size).toBe(devices.length)
    for (const e of deactivated) {
      expect(e.data).toMatchObject({
        key_id: key.id,
        product_id: key.product_id,
        activation: { status: 'deactivated', deactivation_reason: 'inactive', deactivated_at: expect.any(String) },
      })
    }
    for (const k of [never, longer]) expect((await row(k.key.id, keptDevice))[0]!.status).toBe('active')
    // the key object: nothing in use, and releases are not the holder's deactivations
    const detail = (await h.call('GET', `/v1/keys/${key.id}`, { token })).body
    expect(detail).toMatchObject({ activations_used: 0, deactivations_used: 0 })
    expect(detail.activations.every((a: { deactivation_reason: string }) => a.deactivation_reason === 'inactive')).toBe(true)
    // a further pass finds nothing
    expect(await sweep()).toBe(0)
    expect(await events(h.node.deps.sql, 'activation.deactivated', key.id)).toHaveLength(devices.length)
  })

  test('the freed slot goes to the next device; the released device comes back with a new activation', async () => {
    const { token, key } = await setup(h, { release_after_seconds: 60, activation_limit: 1 })
    const [a, b] = [fingerprint(), fingerprint()]
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a })).body.valid).toBe(true)
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: b })).body).toEqual({ valid: false, reason: 'activation_limit' })
    await idleFor(key.id, 120)
    expect(await sweep()).toBe(1)
    // this node held the key in memory with device a: the release dropped it
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: b })).body).toMatchObject({ valid: true, activations_used: 1 })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a })).body).toEqual({ valid: false, reason: 'activation_limit' })
    await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: b } })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a })).body).toMatchObject({ valid: true, activations_used: 1 })
    // history: a's released row and its new one
    const history = await row(key.id, a)
    expect(history.map((r) => [r.status, r.deactivation_reason])).toEqual([
      ['deactivated', 'inactive'],
      ['active', null],
    ])
  })

  test('a device that validated within the window is not released, even while its last-seen time is only in memory', async () => {
    const { token, key } = await setup(h, { release_after_seconds: 60 })
    const d = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    await idleFor(key.id, 600)
    // the device comes back: the answer is valid and its time waits in this node's last-seen batch
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    expect(h.node.deps.validation.lastSeen.size).toBeGreaterThan(0)
    expect(Date.now() - (await row(key.id, d))[0]!.last_validated_at.getTime()).toBeGreaterThan(500_000)
    // the sweep finds it due in Postgres, so it asks every node (here: this one) to write its pending
    // last-seen times before it claims anything
    expect(await sweep()).toBe(0)
    const [after] = await row(key.id, d)
    expect(after!.status).toBe('active')
    expect(Date.now() - after!.last_validated_at.getTime()).toBeLessThan(60_000)
    expect(await events(h.node.deps.sql, 'activation.deactivated', key.id)).toHaveLength(0)
  })

  test('a flush resolves only once every earlier recorded time is written, also one an earlier flush is still writing', async () => {
    const { token, key } = await setup(h, { release_after_seconds: 60 })
    const d = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    await idleFor(key.id, 600)
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    const lastSeen = h.node.deps.validation.lastSeen
    expect(lastSeen.size).toBe(1)
    const first = lastSeen.flush() // takes the pending time and starts writing it
    expect(lastSeen.size).toBe(0)
    await lastSeen.flush() // nothing pending of its own: waits for the first one's write
    expect(Date.now() - (await row(key.id, d))[0]!.last_validated_at.getTime()).toBeLessThan(60_000)
    await first
  })

  test('the window is release_after_seconds plus the grace: just inside it nothing is released', async () => {
    const { token, key } = await setup(h, { release_after_seconds: 60 })
    const d = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    await h.node.deps.validation.flush()
    await idleFor(key.id, 60) // due for the contract, but a last-seen write may still be on its way
    expect(await sweep()).toBe(0)
    await idleFor(key.id, 63)
    expect(await sweep()).toBe(1)
  })

  test('PATCH release_after_seconds applies to the devices already active; null stops releasing', async () => {
    const { token, key } = await setup(h, { activation_limit: 3 })
    const [a, b] = [fingerprint(), fingerprint()]
    for (const d of [a, b]) expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)
    await h.node.deps.validation.flush()
    await idleFor(key.id, 600)
    expect(await sweep()).toBe(0) // the key does not release
    await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { release_after_seconds: 3600 } })
    expect(await sweep()).toBe(0) // 600 s idle is inside an hour
    await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { release_after_seconds: 300 } })
    await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { release_after_seconds: null } })
    expect(await sweep()).toBe(0)
    await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { release_after_seconds: 300 } })
    expect(await sweep()).toBe(2)
    // a device activated after the change carries the key's setting too
    const c = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: c })).body.valid).toBe(true)
    await idleFor(key.id, 400)
    expect(await sweep()).toBe(1)
  })
})

// Expiry sweeper: the stored status flips to expired and key.expired is written exactly once per key,
// with several sweepers at once (the node's own background sweeper plus two more, on separate
// connections when DATABASE_URL is set).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Db } from '../../src/infra/db'
import { sweepExpiredKeys } from '../../src/modules/keys/expiry-sweeper'
import { newKey, realPostgres, useHarness } from '../support/harness'
import { events, setup, until, validate, fingerprint } from '../validation/support'

let other: Db | null = null
afterAll(() => other?.close()) // registered before the harness: closed before its database is dropped
const h = useHarness() // background sweeper every SWEEP_INTERVAL_MS (1 s)
beforeAll(async () => {
  other = realPostgres ? await h.db.open() : null
}, 60_000)

const storedStatus = async (ids: string[]) =>
  h.node.deps.sql<{ id: string; status: string }[]>`select id, status from license_keys where id in ${h.node.deps.sql(ids)}`

test('three sweepers at once: every due key expires once, with exactly one key.expired event', async () => {
  const { token, product } = await setup(h)
  // Created with a term ahead (however long the 30 creations take on a loaded machine), then moved
  // into the past at once in Postgres, where the sweepers read it.
  const keys = []
  for (let i = 0; i < 30; i++) keys.push(await newKey(h.call, token, product.id, { expires_at: new Date(Date.now() + 3_600_000).toISOString() }))
  const perpetual = await newKey(h.call, token, product.id)
  const ids = keys.map((k) => k.id)
  const expiresAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 1000).toISOString()
  await h.node.deps.sql`update license_keys set expires_at = ${expiresAt} where id in ${h.node.deps.sql(ids)}`

  // small batches so the sweepers interleave; the node's own sweeper runs alongside
  const sqlB = other?.sql ?? h.node.deps.sql
  const swept = await Promise.all([sweepExpiredKeys(h.node.deps.sql, 4), sweepExpiredKeys(sqlB, 4)])
  const settled = await until(() => storedStatus(ids), (rows) => rows.every((r) => r.status === 'expired'))
  expect(settled.every((r) => r.status === 'expired')).toBe(true)
  expect(swept[0] + swept[1]).toBeLessThanOrEqual(30)
  for (const id of ids) {
    const evts = await events(h.node.deps.sql, 'key.expired', id)
    expect(evts).toHaveLength(1)
    expect(evts[0].data).toMatchObject({ id, status: 'expired', expires_at: expiresAt })
  }
  // a further pass finds nothing; the perpetual key is untouched
  expect(await sweepExpiredKeys(sqlB)).toBe(0)
  expect((await storedStatus([perpetual.id]))[0].status).toBe('active')
  expect(await events(h.node.deps.sql, 'key.expired', perpetual.id)).toHaveLength(0)
})

test('the background sweeper flips a key within seconds of expires_at; validate already says expired', async () => {
  const { token, key } = await setup(h, { expires_at: new Date(Date.now() + 1_000).toISOString() })
  const fp = fingerprint()
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
  await Bun.sleep(1_050)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.reason).toBe('expired')
  const [row] = await until(() => storedStatus([key.id]), ([r]) => r.status === 'expired', 8_000)
  expect(row.status).toBe('expired')
  expect(await until(() => events(h.node.deps.sql, 'key.expired', key.id), (e) => e.length === 1)).toHaveLength(1)
  // the key object agrees, and extending brings it back (stored status active again)
  expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('expired')
  const extended = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: null } })
  expect(extended.body.status).toBe('active')
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
})

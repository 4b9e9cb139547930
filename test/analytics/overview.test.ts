// GET /v1/analytics/overview: every field against known fixtures, effective status, isolation.
import { expect, test } from 'bun:test'
import { PLAN_LIMITS } from '../../src/core/plans'
import { newKey, newProduct, useHarness } from '../support/harness'
import { activate, analytics, countedFromRecord } from './fixtures'

const h = useHarness({ socket: false })

const inHours = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString()

async function overview(token: string) {
  const res = await analytics(h, token, 'overview')
  expect(res.status).toBe(200)
  return res.body
}

test('every overview field is computed from the record', async () => {
  const { id, token } = await h.account('growth')
  const sql = h.node.deps.sql
  const p1 = await newProduct(h.call, token)
  const p2 = await newProduct(h.call, token)
  const perpetual = await newKey(h.call, token, p1.id)
  const soon = await newKey(h.call, token, p1.id, { expires_at: inHours(3 * 24) })
  const justInside = await newKey(h.call, token, p2.id, { expires_at: inHours(7 * 24 - 1) })
  await newKey(h.call, token, p2.id, { expires_at: inHours(7 * 24 + 1) }) // active, not expiring soon
  await newKey(h.call, token, p1.id, { expires_at: inHours(10 * 24) })
  const revoked = await newKey(h.call, token, p1.id, { expires_at: inHours(2 * 24) })
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)
  // past expires_at while the stored status is still active: the sweeper has not run yet
  const unswept = await newKey(h.call, token, p2.id, { expires_at: inHours(1) })
  await sql`update license_keys set expires_at = now() - interval '1 minute' where id = ${unswept.id}`
  const swept = await newKey(h.call, token, p2.id, { expires_at: inHours(1) })
  await sql`update license_keys set expires_at = now() - interval '1 day', status = 'expired' where id = ${swept.id}`

  await activate(sql, id, [
    { keyId: perpetual.id, daysAgo: 0, country: 'DE' },
    { keyId: perpetual.id, daysAgo: 0, country: null, status: 'deactivated' },
    { keyId: soon.id, daysAgo: 0, country: 'US' },
    { keyId: soon.id, daysAgo: 1, country: 'US' },
    { keyId: justInside.id, daysAgo: 1, country: 'FR' },
    { keyId: unswept.id, daysAgo: 10, country: 'zz' },
  ])
  for (let i = 0; i < 7; i++) expect(await h.node.deps.counters.take(id, 200_000)).toBe(true)

  expect(await overview(token)).toEqual({
    total_keys: 8,
    active_keys: 5, // perpetual, soon, justInside, +7d+1h, +10d
    total_activations: 6,
    activations_today: 3,
    expiring_soon: 2, // soon (3 d) and justInside (7 d - 1 h); not the revoked one, not +7d+1h
    api_calls_today: 7,
    api_calls_limit_today: PLAN_LIMITS.growth.validationsPerDay!,
  })
  const record = await countedFromRecord(sql, id)
  const o = await overview(token)
  expect({ ...record }).toEqual({
    total_keys: o.total_keys,
    active_keys: o.active_keys,
    total_activations: o.total_activations,
    activations_today: o.activations_today,
  })
})

test('a revoked key leaves active_keys and expiring_soon at once; an extended expired key returns', async () => {
  const { token } = await h.account('hobby')
  const sql = h.node.deps.sql
  const product = await newProduct(h.call, token)
  const a = await newKey(h.call, token, product.id, { expires_at: inHours(24) })
  const b = await newKey(h.call, token, product.id)
  expect(await overview(token)).toMatchObject({ total_keys: 2, active_keys: 2, expiring_soon: 1, api_calls_limit_today: 10_000 })

  expect((await h.call('POST', `/v1/keys/${a.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect(await overview(token)).toMatchObject({ total_keys: 2, active_keys: 1, expiring_soon: 0 })
  // revoking twice changes nothing
  expect((await h.call('POST', `/v1/keys/${a.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect(await overview(token)).toMatchObject({ total_keys: 2, active_keys: 1 })

  // b passes its expiry: not active before the sweeper ran, nor after it did
  await sql`update license_keys set expires_at = now() - interval '1 second' where id = ${b.id}`
  expect(await overview(token)).toMatchObject({ total_keys: 2, active_keys: 0, expiring_soon: 0 })
  await sql`update license_keys set status = 'expired' where id = ${b.id} and status = 'active'`
  expect(await overview(token)).toMatchObject({ total_keys: 2, active_keys: 0 })

  const extended = await h.call('POST', `/v1/keys/${b.id}/extend`, { token, body: { expires_at: inHours(48) } })
  expect(extended.status).toBe(200)
  expect(await overview(token)).toMatchObject({ total_keys: 2, active_keys: 1, expiring_soon: 1 })
})

test('api_calls_limit_today follows the plan, -1 when unlimited', async () => {
  for (const plan of ['hobby', 'starter', 'growth', 'enterprise'] as const) {
    const { token } = await h.account(plan)
    const body = await overview(token)
    expect(body.api_calls_limit_today).toBe(PLAN_LIMITS[plan].validationsPerDay ?? -1)
    expect(body).toEqual({
      total_keys: 0,
      active_keys: 0,
      total_activations: 0,
      activations_today: 0,
      expiring_soon: 0,
      api_calls_today: 0,
      api_calls_limit_today: body.api_calls_limit_today,
    })
  }
})

test('api_calls_today counts the calls taken by the counters, per account', async () => {
  const a = await h.account('starter')
  const b = await h.account('starter')
  const counters = h.node.deps.counters
  for (let i = 0; i < 25; i++) await counters.take(a.id, 50_000)
  for (let i = 0; i < 3; i++) await counters.take(b.id, 50_000)
  expect((await overview(a.token)).api_calls_today).toBe(25)
  expect((await overview(b.token)).api_calls_today).toBe(3)
  // a call refused at the limit is not counted
  const c = await h.account('starter')
  for (let i = 0; i < 5; i++) await counters.take(c.id, 4)
  expect((await overview(c.token)).api_calls_today).toBe(4)
})

test('accounts see only their own figures', async () => {
  const a = await h.account('growth')
  const b = await h.account('growth')
  const pa = await newProduct(h.call, a.token)
  const pb = await newProduct(h.call, b.token)
  const ka = await newKey(h.call, a.token, pa.id, { expires_at: inHours(30) })
  const kb1 = await newKey(h.call, b.token, pb.id)
  await newKey(h.call, b.token, pb.id)
  await activate(h.node.deps.sql, a.id, [{ keyId: ka.id, daysAgo: 0, country: 'SE' }])
  await activate(h.node.deps.sql, b.id, [
    { keyId: kb1.id, daysAgo: 0, country: 'NO' },
    { keyId: kb1.id, daysAgo: 2, country: 'NO' },
  ])
  expect(await overview(a.token)).toMatchObject({ total_keys: 1, active_keys: 1, total_activations: 1, activations_today: 1, expiring_soon: 1 })
  expect(await overview(b.token)).toMatchObject({ total_keys: 2, active_keys: 2, total_activations: 2, activations_today: 1, expiring_soon: 0 })
})

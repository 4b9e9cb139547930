// The rollups behind analytics stay equal to the system of record whatever writes it: the activation
// slot primitive, bulk statements, revocation, the expiry sweeper's batches, extension, product
// deletion (cascades), concurrent new activations, and the migration's own backfill.
import { DEVICE } from '../../src/modules/events/outbox'
import { beforeAll, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { newId } from '../../src/infra/crypto'
import type { Sql } from '../../src/infra/db'
import { takeSeat, lockKeyForSeat } from '../../src/modules/activations/repo'
import { fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { activate, analytics, countedFromRecord } from './fixtures'

const h = useHarness({ socket: false })
let sql: Sql
beforeAll(async () => {
  sql = h.node.deps.sql
}, 60_000)

/** What the three routes answer, and the same figures counted from the base tables. */
async function answeredAndCounted(accountId: string, token: string) {
  const overview = (await analytics(h, token, 'overview')).body
  const trend = (await analytics(h, token, 'activations?range=90d')).body as { date: string; activations: number }[]
  const geography = (await analytics(h, token, 'geography')).body
  const record = await countedFromRecord(sql, accountId)
  const [{ expiring_soon }] = await sql`select count(*)::int as expiring_soon from license_keys where account_id = ${accountId}
    and status = 'active' and expires_at > now() and expires_at <= now() + interval '7 days'`
  const days = await sql<{ date: string; n: number }[]>`select to_char(analytics_utc_day(activated_at), 'YYYY-MM-DD') as date,
      count(*)::int as n from activations where account_id = ${accountId}
      and analytics_utc_day(activated_at) > analytics_utc_day(now()) - 90 group by 1`
  const countries = await sql`select upper(country) as country, count(*)::int as activations from activations
    where account_id = ${accountId} and country ~ '^[A-Za-z]{2}$' group by 1 order by 2 desc, upper(country) collate "C"`
  const perDay = new Map(days.map((d) => [d.date, d.n]))
  return {
    answered: { overview: { ...overview, api_calls_today: 0, api_calls_limit_today: 0 }, trend, geography },
    counted: {
      overview: { ...record, expiring_soon, api_calls_today: 0, api_calls_limit_today: 0 },
      trend: trend.map((e) => ({ date: e.date, activations: perDay.get(e.date) ?? 0 })),
      geography: [...countries],
    },
  }
}

async function expectConsistent(accountId: string, token: string) {
  const { answered, counted } = await answeredAndCounted(accountId, token)
  expect(answered).toEqual(counted)
  return answered
}


test('every kind of write keeps the rollups equal to the record', async () => {
  const { id, token } = await h.account('growth')
  const p1 = await newProduct(h.call, token)
  const p2 = await newProduct(h.call, token)

  // the real activation path, with the country from the request
  const k = await newKey(h.call, token, p1.id)
  await sql.begin(async (tx) => {
    const key = (await lockKeyForSeat(tx, id, { id: k.id }))!
    expect((await takeSeat(tx, key, { fingerprint: fingerprint(), appVersion: '1.0', country: 'NL' }, DEVICE)).kind).toBe('created')
  })
  let a = await expectConsistent(id, token)
  expect(a.overview).toMatchObject({ total_keys: 1, active_keys: 1, total_activations: 1, activations_today: 1 })
  expect(a.geography).toEqual([{ country: 'NL', activations: 1 }])

  // one statement inserting many keys and many activations over several days and countries
  const ids = Array.from({ length: 40 }, () => newId('key'))
  await sql`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, activation_limit, status, expires_at)
    select v.id, ${id}, case when v.i % 2 = 0 then ${p1.id} else ${p2.id} end, 'hash-' || v.id, 'ABCDE', 3,
      case when v.i % 10 = 0 then 'revoked' else 'active' end,
      case when v.i % 4 = 0 then null else now() + make_interval(hours => ((v.i % 12) * 24 - 36)::int) end
    from unnest(${ids}::text[]) with ordinality as v(id, i)`
  await activate(
    sql,
    id,
    ids.flatMap((keyId, i) => [
      { keyId, daysAgo: i % 9, country: ['DE', 'us', 'FR', null, 'X1'][i % 5] },
      { keyId, daysAgo: (i * 7) % 120, country: ['JP', 'DE'][i % 2], status: 'deactivated' as const },
    ]),
  )
  a = await expectConsistent(id, token)
  expect(a.overview.total_keys).toBe(41)
  expect(a.overview.total_activations).toBe(81)

  // revocations, a sweeper batch, an extension back to active
  for (const keyId of ids.slice(0, 5)) await h.call('POST', `/v1/keys/${keyId}/revoke`, { token, body: {} })
  await expectConsistent(id, token)
  await sql`update license_keys set status = 'expired' where account_id = ${id} and status = 'active' and expires_at <= now()`
  await expectConsistent(id, token)
  const [expired] = await sql`select id from license_keys where account_id = ${id} and status = 'expired' limit 1`
  expect(expired).toBeDefined()
  const extended = await h.call('POST', `/v1/keys/${expired.id}/extend`, { token, body: { expires_at: null } })
  expect(extended.status).toBe(200)
  await expectConsistent(id, token)

  // an activation moved to another day and country (no route does this; the rollups follow anyway)
  await sql`update activations set activated_at = activated_at - interval '2 days', country = 'SE'
    where id = (select id from activations where account_id = ${id} order by id limit 1)`
  await expectConsistent(id, token)

  // deleting a product takes its keys and their activations out of every figure
  await sql`update license_keys set status = 'revoked' where product_id = ${p2.id}`
  expect((await h.call('DELETE', `/v1/products/${p2.id}`, { token })).status).toBe(204)
  a = await expectConsistent(id, token)
  expect(a.overview.total_keys).toBe(21)
})

test('concurrent new activations of one account, product and day are all counted', async () => {
  const { id, token } = await h.account('growth')
  const product = await newProduct(h.call, token)
  const keys = await Promise.all(Array.from({ length: 12 }, () => newKey(h.call, token, product.id, { activation_limit: 10 })))
  const claims = keys.flatMap((k) =>
    Array.from({ length: 4 }, () =>
      sql.begin(async (tx) => {
        const key = (await lockKeyForSeat(tx, id, { id: k.id }))!
        return (await takeSeat(tx, key, { fingerprint: fingerprint(), appVersion: null, country: 'CA' }, DEVICE)).kind
      }),
    ),
  )
  expect(new Set(await Promise.all(claims))).toEqual(new Set(['created']))
  const a = await expectConsistent(id, token)
  expect(a.overview.activations_today).toBe(48)
  expect(a.geography).toEqual([{ country: 'CA', activations: 48 }])
})

test("the migration's backfill computes what the triggers maintained", async () => {
  const file = readFileSync(join(import.meta.dir, '../../sql/004_analytics.sql'), 'utf8')
  const backfill = file.slice(file.indexOf('-- Backfill'))
  expect(backfill).toContain('insert into analytics_key_counts')
  const snapshot = (s: Sql) => s`select
      (select json_agg(x order by x.account_id) from (select account_id, sum(total)::int as t, sum(active)::int as a
         from analytics_key_counts group by 1 having sum(total) <> 0) x) as keys,
      (select json_agg(x order by x.account_id, x.day, x.product_id) from (select account_id, day, product_id,
         sum(activations)::int as n from analytics_daily_activations group by 1, 2, 3 having sum(activations) <> 0) x) as days,
      (select json_agg(x order by x.account_id, x.country) from (select account_id, country, sum(activations)::int as n
         from analytics_country_activations group by 1, 2 having sum(activations) <> 0) x) as countries`
  const [maintained] = await snapshot(sql)
  expect(maintained.days.length).toBeGreaterThan(10)
  const rebuilt = await sql
    .begin(async (tx) => {
      await tx`delete from analytics_key_counts`
      await tx`delete from analytics_daily_activations`
      await tx`delete from analytics_country_activations`
      await tx.unsafe(backfill)
      const [r] = await snapshot(tx as unknown as Sql)
      throw Object.assign(new Error('rollback'), { rebuilt: r })
    })
    .catch((err) => err.rebuilt)
  expect(rebuilt).toEqual(maintained)
})

test('concurrent product deletions and sweeper batches in one account neither deadlock nor drift', async () => {
  const { id, token } = await h.account('growth')
  const products = await Promise.all(Array.from({ length: 6 }, () => newProduct(h.call, token)))
  const keep = await newProduct(h.call, token)
  const keyIds: string[] = []
  for (const p of [...products, keep]) {
    for (let i = 0; i < 4; i++) keyIds.push((await newKey(h.call, token, p.id, { expires_at: new Date(Date.now() + 3600e3).toISOString() })).id)
  }
  const countries = ['DE', 'US', 'FR', 'JP', 'BR', 'IN', 'CA', 'AU']
  await activate(sql, id, keyIds.flatMap((keyId, i) => countries.map((country, j) => ({ keyId, daysAgo: (i + j) % 5, country }))))
  await sql`update license_keys set expires_at = now() - interval '1 second' where account_id = ${id}`
  await sql`update license_keys set status = 'revoked' where product_id in ${sql(products.map((p) => p.id))}`
  // two sweeper batches racing each other and six product deletions
  const sweeps = [0, 1].map(() => sql`update license_keys set status = 'expired' where account_id = ${id} and status = 'active'
    and expires_at <= now()`)
  const deletions = products.map((p) => h.call('DELETE', `/v1/products/${p.id}`, { token }))
  const results = await Promise.all([...deletions, ...sweeps])
  expect(results.slice(0, products.length).map((r) => (r as { status: number }).status)).toEqual(products.map(() => 204))
  const a = await expectConsistent(id, token)
  expect(a.overview).toMatchObject({ total_keys: 4, active_keys: 0, total_activations: 32 })
  expect(a.geography).toEqual(countries.sort().map((country) => ({ country, activations: 4 })))
})

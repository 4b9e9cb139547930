// GET /v1/analytics/activations and /geography against activations written on chosen UTC days.
import { beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, useHarness } from '../support/harness'
import { activate, analytics, daysBefore, utcToday } from './fixtures'

const h = useHarness({ socket: false })
let acct: { id: string; token: string }
let p1: { id: string }
let p2: { id: string }
let today: string
beforeAll(async () => {
  acct = await h.account('starter')
  p1 = await newProduct(h.call, acct.token)
  p2 = await newProduct(h.call, acct.token)
  const k1 = await newKey(h.call, acct.token, p1.id)
  const k1b = await newKey(h.call, acct.token, p1.id)
  const k2 = await newKey(h.call, acct.token, p2.id)
  // p1: the window edges of each range (29 in 30d, 30 not; 89 in 90d, 90 not)
  await activate(h.node.deps.sql, acct.id, [
    { keyId: k1.id, daysAgo: 0 },
    { keyId: k1b.id, daysAgo: 0, status: 'deactivated' }, // still a new activation that day
    ...[6, 7, 29, 30, 89, 90].map((daysAgo) => ({ keyId: k1.id, daysAgo })),
  ])
  // p2: nothing at either end of any range
  await activate(h.node.deps.sql, acct.id, [3, 15, 45].map((daysAgo) => ({ keyId: k2.id, daysAgo })))
  today = await utcToday(h.node.deps.sql)
}, 60_000)

/** The expected trend: `days` entries ending today with `counts[daysAgo]`, zero elsewhere. */
function expected(days: number, counts: Record<number, number>) {
  return Array.from({ length: days }, (_, i) => {
    const daysAgo = days - 1 - i
    return { date: daysBefore(today, daysAgo), activations: counts[daysAgo] ?? 0 }
  })
}

async function trend(query: string, token = acct.token) {
  const res = await analytics(h, token, `activations${query}`)
  expect(res.status).toBe(200)
  return res.body
}

test('the default range is 7 days ending today, ascending, zero-filled', async () => {
  const body = await trend('')
  expect(body).toEqual(expected(7, { 0: 2, 3: 1, 6: 1 }))
  expect(body.at(-1).date).toBe(new Date().toISOString().slice(0, 10))
  expect(await trend('?range=7d')).toEqual(body)
})

test('30d and 90d have exactly 30 and 90 entries and cut at their first day', async () => {
  expect(await trend('?range=30d')).toEqual(expected(30, { 0: 2, 3: 1, 6: 1, 7: 1, 15: 1, 29: 1 }))
  expect(await trend('?range=90d')).toEqual(expected(90, { 0: 2, 3: 1, 6: 1, 7: 1, 15: 1, 29: 1, 30: 1, 45: 1, 89: 1 }))
})

test('product_id narrows the trend; zero-filled days at both ends of every range', async () => {
  for (const [range, days] of [['7d', 7], ['30d', 30], ['90d', 90]] as const) {
    const only2 = await trend(`?range=${range}&product_id=${p2.id}`)
    const counts = Object.fromEntries([3, 15, 45].filter((d) => d < days).map((d) => [d, 1]))
    expect(only2).toEqual(expected(days, counts))
    expect(only2[0].activations).toBe(0)
    expect(only2.at(-1).activations).toBe(0)
  }
  expect(await trend(`?range=90d&product_id=${p1.id}`)).toEqual(expected(90, { 0: 2, 6: 1, 7: 1, 29: 1, 30: 1, 89: 1 }))
})

test('an unknown, malformed or foreign product_id is 404', async () => {
  const other = await h.account('growth')
  const foreign = await newProduct(h.call, other.token)
  for (const id of ['prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3A', 'nope', '', foreign.id]) {
    const res = await analytics(h, acct.token, `activations?product_id=${encodeURIComponent(id)}`)
    expect(res.status).toBe(404)
    expect(res.body.code).toBe('not_found')
    expect(res.headers.get('content-type')).toContain('application/problem+json')
  }
  // and the owner sees its own product's (empty) trend
  expect(await trend(`?product_id=${foreign.id}`, other.token)).toEqual(expected(7, {}))
})

test('a range other than 7d, 30d, 90d is 400', async () => {
  for (const range of ['5d', '7', '7D', '', '365d', '90d%00', 'x'.repeat(300)]) {
    const res = await analytics(h, acct.token, `activations?range=${range}`)
    expect(res.status).toBe(400)
    expect(res.body.code).toBe('invalid_request')
    expect(res.body.errors.length).toBeGreaterThan(0)
  }
})

test('geography: two-letter countries, upper case, most first, ties by country', async () => {
  const { id, token } = await h.account('hobby')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { activation_limit: 100 })
  const countries = ['US', 'US', 'US', 'DE', 'DE', 'de', 'AT', 'AT', 'AT', 'FR', 'FR', 'gb', 'CH', 'BE']
  const notCounted = [null, '', 'XXX', 'D1', 'T1', '1A', 'A', 'ÄÖ', ' DE']
  await activate(
    h.node.deps.sql,
    id,
    [...countries, ...notCounted].map((country, i) => ({ keyId: key.id, daysAgo: i % 40, country })),
  )
  const res = await analytics(h, token, 'geography')
  expect(res.status).toBe(200)
  expect(res.body).toEqual([
    { country: 'AT', activations: 3 },
    { country: 'DE', activations: 3 },
    { country: 'US', activations: 3 },
    { country: 'FR', activations: 2 },
    { country: 'BE', activations: 1 },
    { country: 'CH', activations: 1 },
    { country: 'GB', activations: 1 },
  ])
  // activations without a usable country still count in the totals
  const overview = await analytics(h, token, 'overview')
  expect(overview.body.total_activations).toBe(countries.length + notCounted.length)
})

test('geography is per account and empty without activations', async () => {
  const fresh = await h.account('growth')
  const res = await analytics(h, fresh.token, 'geography')
  expect(res.status).toBe(200)
  expect(res.body).toEqual([])
  // the account with the trend fixtures recorded no countries at all
  expect((await analytics(h, acct.token, 'geography')).body).toEqual([])
})

// GET /v1/analytics/validations: validate answers by outcome per UTC day, counted in memory on the
// node and written by its flush job; the route reads what Postgres holds.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { NO_PRODUCT, OUTCOME, ValidationCounts } from '../../src/modules/analytics/validation-counts'
import { fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { until } from '../validation/support'
import { daysBefore, utcToday } from './fixtures'

setDefaultTimeout(60_000)
const h = useHarness({ env: { FLUSH_INTERVAL_MS: '100' } })

const FIELDS = ['date', 'valid', 'not_found', 'revoked', 'expired', 'activation_limit', 'rate_limited', 'suspended', 'entitlements_missing', 'device_already_used', 'credits_exhausted', 'device_mismatch']
const zero = { valid: 0, not_found: 0, revoked: 0, expired: 0, activation_limit: 0, rate_limited: 0, suspended: 0, entitlements_missing: 0, device_already_used: 0, credits_exhausted: 0, device_mismatch: 0 }
const validations = (token: string, query = '') => h.call('GET', `/v1/analytics/validations${query}`, { token })
const validate = (token: string, body: Record<string, unknown>) => h.call('POST', '/v1/validate', { token, body })

/** Today's entry once the flush has written `expected` answers in all. */
async function todayOnceFlushed(token: string, expected: number, query = '') {
  const res = await until(
    () => validations(token, query),
    (r) => r.status === 200 && sumOf(r.body.at(-1)) === expected,
  )
  expect(res.status).toBe(200)
  return res.body.at(-1)
}
const sumOf = (e: Record<string, number>) => Object.entries(e).reduce((s, [k, v]) => (k === 'date' ? s : s + v), 0)

test('the shape: 30 days by default, ascending, zero-filled, ending today; 7d and 90d; other ranges are 400', async () => {
  const { token } = await h.account('hobby')
  const today = await utcToday(h.node.deps.sql)
  const res = await validations(token)
  expect(res.status).toBe(200)
  expect(res.body).toHaveLength(30)
  expect(res.body.at(-1).date).toBe(today)
  expect(res.body[0].date).toBe(daysBefore(today, 29))
  for (const [i, entry] of res.body.entries()) {
    expect(Object.keys(entry).sort()).toEqual([...FIELDS].sort())
    expect(entry).toEqual({ date: daysBefore(today, 29 - i), ...zero })
  }
  for (const [range, n] of [['7d', 7], ['30d', 30], ['90d', 90]] as const) {
    const r = await validations(token, `?range=${range}`)
    expect(r.status).toBe(200)
    expect(r.body).toHaveLength(n)
    expect(r.body.at(-1).date).toBe(today)
    expect(r.body[0].date).toBe(daysBefore(today, n - 1))
  }
  for (const bad of ['?range=1d', '?range=365d', '?range=', '?range=7']) {
    const r = await validations(token, bad)
    expect({ bad, status: r.status, code: r.body.code }).toEqual({ bad, status: 400, code: 'invalid_request' })
  }
})

test('each outcome is counted on its day; with product_id only that product, not_found and rate_limited 0', async () => {
  const { token } = await h.account('growth')
  const validator = await scopedToken(h.call, token, 'validate')
  const reader = await scopedToken(h.call, token, 'analytics:read')
  const [p1, p2] = [await newProduct(h.call, token), await newProduct(h.call, token)]
  const k1 = await newKey(h.call, token, p1.id, { activation_limit: 1 })
  const k2 = await newKey(h.call, token, p2.id)
  const revoked = await newKey(h.call, token, p1.id)
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)
  const suspended = await newKey(h.call, token, p1.id)
  expect((await h.call('POST', `/v1/keys/${suspended.id}/suspend`, { token, body: {} })).status).toBe(200)

  const device = fingerprint()
  const answers: [Record<string, unknown>, string][] = [
    [{ key: k1.key_value, device_fingerprint: device }, 'valid'], // new device
    [{ key: k1.key_value, device_fingerprint: device }, 'valid'], // known device, from memory
    [{ key: k1.key_value, device_fingerprint: fingerprint() }, 'activation_limit'],
    [{ key: k2.key_value, device_fingerprint: device }, 'valid'],
    [{ key: revoked.key_value, device_fingerprint: device }, 'revoked'],
    [{ key: suspended.key_value, device_fingerprint: device }, 'suspended'],
    [{ key: k2.key_value, device_fingerprint: device, require_entitlements: ['sso'] }, 'entitlements_missing'],
    [{ key: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE', device_fingerprint: device }, 'not_found'],
    [{ key: 'not a key', device_fingerprint: device }, 'not_found'],
    [{ key: k2.key_value, device_fingerprint: device, product_id: p1.id }, 'not_found'], // wrong product
  ]
  for (const [body, outcome] of answers) {
    const res = await validate(validator, body)
    expect(res.status).toBe(200)
    expect(res.body.valid ? 'valid' : res.body.reason).toBe(outcome)
  }
  const today = await todayOnceFlushed(reader, answers.length)
  expect(today).toMatchObject({ valid: 3, not_found: 3, revoked: 1, expired: 0, activation_limit: 1, rate_limited: 0, suspended: 1, entitlements_missing: 1 })
  // a day's columns sum to its api_calls_today (no 429 here)
  const overview = await h.call('GET', '/v1/analytics/overview', { token: reader })
  expect(overview.body.api_calls_today).toBe(sumOf(today))

  expect((await validations(reader, `?product_id=${p1.id}`)).body.at(-1)).toMatchObject({ ...zero, valid: 2, revoked: 1, activation_limit: 1, suspended: 1 })
  expect((await validations(reader, `?range=7d&product_id=${p2.id}`)).body.at(-1)).toMatchObject({ ...zero, valid: 1, entitlements_missing: 1 })
  // earlier days stay zero
  expect((await validations(reader)).body.slice(0, -1).every((e: Record<string, number>) => sumOf(e) === 0)).toBe(true)
})

test('an expired key counts as expired under its product', async () => {
  const { token } = await h.account('hobby')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { expires_at: new Date(Date.now() + 1_500).toISOString() })
  await Bun.sleep(1_600)
  const res = await validate(token, { key: key.key_value, device_fingerprint: fingerprint() })
  expect(res.body).toEqual({ valid: false, reason: 'expired' })
  expect(await todayOnceFlushed(token, 1, `?product_id=${product.id}`)).toMatchObject({ ...zero, expired: 1 })
})

test('429s are counted as rate_limited, under no product', async () => {
  const { id, token } = await h.account('hobby')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id)
  // Spend the day's quota (10,000 on Hobby) in process, then validate over HTTP.
  for (let i = 0; i < 10_000; i++) if (!(await h.node.deps.counters.take(id, 10_000))) throw new Error('quota refused early')
  for (let i = 0; i < 3; i++) {
    const res = await validate(token, { key: key.key_value, device_fingerprint: fingerprint() })
    expect(res.status).toBe(429)
  }
  expect(await todayOnceFlushed(token, 3)).toMatchObject({ ...zero, rate_limited: 3 })
  expect((await validations(token, `?product_id=${product.id}`)).body.at(-1)).toMatchObject(zero)
})

test("an unknown product, a malformed id or another account's product: 404", async () => {
  const { token } = await h.account('growth')
  const other = await h.account('growth')
  const theirs = await newProduct(h.call, other.token)
  for (const id of [theirs.id, 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I', 'nope']) {
    const res = await validations(token, `?product_id=${id}`)
    expect({ id, status: res.status, code: res.body.code }).toEqual({ id, status: 404, code: 'not_found' })
  }
})

test('Free plan: 402 before anything else; scopes: analytics:read or full_access, else 403', async () => {
  const free = await h.account('free')
  for (const query of ['', '?range=5d', '?product_id=nope']) {
    const res = await validations(free.token, query)
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 402, code: 'plan_upgrade_required' })
  }
  const { token } = await h.account('starter')
  const validator = await scopedToken(h.call, token, 'validate')
  expect((await validations(validator)).status).toBe(403)
  expect((await validations(await scopedToken(h.call, token, 'analytics:read'))).status).toBe(200)
  expect((await h.call('GET', '/v1/analytics/validations')).status).toBe(401)
})

test('the in-memory counts: per account, product and day; a day that ends keeps its own counts', () => {
  const counts = new ValidationCounts(null, Date.parse('2026-11-23T12:00:00Z'))
  const day = Date.parse('2026-11-23T23:59:59.900Z')
  counts.record('acct_a', 'prod_1', OUTCOME.valid, day)
  counts.record('acct_a', 'prod_1', OUTCOME.valid, day)
  counts.record('acct_a', NO_PRODUCT, OUTCOME.not_found, day)
  counts.record('acct_b', 'prod_2', OUTCOME.expired, day)
  counts.record('acct_a', 'prod_1', OUTCOME.valid, day + 200) // the next UTC day
  const rows = counts.take(day + 300)
  const key = (r: { day: string; account: string; product: string }) => `${r.day} ${r.account} ${r.product}`
  expect(Object.fromEntries(rows.map((r) => [key(r), r.counts]))).toEqual({
    '2026-11-23 acct_a prod_1': [2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    '2026-11-23 acct_a ': [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    '2026-11-23 acct_b prod_2': [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
    '2026-11-24 acct_a prod_1': [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
  })
  expect(counts.take(day + 400)).toEqual([]) // taken once
})

// Retention (docs/operations.md, "Retention"): old events, finished deliveries and attempt logs go; pending deliveries (and
// what they need) stay; nothing else is touched. Rows are aged directly in SQL, then the job runs.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { ConfigError, loadConfig } from '../../src/config'
import type { Sql } from '../../src/infra/db'
import { pruneExpired } from '../../src/modules/events/retention'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { requireEnvironment } from '../support/environment'

/** These tests need a real Postgres server (PGlite is one process in memory). */
const postgresHere = await requireEnvironment('events/retention', ['postgres'])

setDefaultTimeout(60_000)

let h: Harness
let sql: Sql
let accountId: string
beforeAll(async () => {
  h = await startHarness()
  sql = h.node.deps.sql
  const acct = await h.account()
  accountId = acct.id
  // real rows around the aged ones: a product, a key and an activation feed the analytics rollups
  const product = await newProduct(h.call, acct.token)
  const key = await newKey(h.call, acct.token, product.id)
  const v = await h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: 'a'.repeat(64) } })
  expect(v.body.valid).toBe(true)
  // The validate's outcome count and its daily call count are in Postgres before the test counts rows
  // (each flush waits for one the background job may have under way).
  await h.node.deps.validation.flush()
  await h.node.deps.counters.flush()
})
afterAll(async () => {
  await h.close()
})

const DAY = 86_400_000
const ago = (days: number) => new Date(Date.now() - days * DAY)
let seq = 0
const id = (prefix: string) => `${prefix}_ret${Date.now().toString(36)}${seq++}`

async function event(createdDaysAgo: number): Promise<string> {
  const e = id('evt')
  await sql`insert into events (id, account_id, type, data, created_at) values (${e}, ${accountId}, 'key.created', ${sql.json({})}, ${ago(createdDaysAgo)})`
  return e
}

async function delivery(webhookId: string, eventId: string, status: string, updatedDaysAgo: number): Promise<string> {
  // a pending one is due tomorrow: the node's delivery worker leaves it alone during the test
  const [row] = await sql<{ id: string }[]>`insert into webhook_deliveries (webhook_id, event_id, account_id, status, created_at, updated_at, next_attempt_at)
    values (${webhookId}, ${eventId}, ${accountId}, ${status}, ${ago(updatedDaysAgo + 1)}, ${ago(updatedDaysAgo)}, ${ago(-1)}) returning id::text`
  return row!.id
}

async function attempt(webhookId: string, deliveryId: string, eventId: string, daysAgo: number): Promise<string> {
  const a = id('whd')
  await sql`insert into webhook_attempts (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, created_at)
    values (${a}, ${webhookId}, ${deliveryId}::bigint, ${accountId}, ${eventId}, 'key.created', 1, 500, false, 3, ${ago(daysAgo)})`
  return a
}

/** A success-log row (sql/032_webhook_successes.sql) of one attempt, for a delivery that is gone. */
async function success(webhookId: string, eventId: string, daysAgo: number): Promise<string> {
  const a = id('whd')
  await sql`insert into webhook_successes (webhook_id, account_id, created_at, n, attempts)
    values (${webhookId}, ${accountId}, ${ago(daysAgo)}, 1, ${sql.json([[a, 999_999, eventId, 'key.created', 1, 200, 3]])})`
  return a
}

/** Row counts of every table but the four retention may prune. */
async function otherTables(): Promise<Record<string, number>> {
  const tables = await sql<{ name: string }[]>`select tablename as name from pg_tables where schemaname = 'public'
    and tablename not in ('events', 'webhook_deliveries', 'webhook_attempts', 'webhook_successes') order by 1`
  const counts: Record<string, number> = {}
  for (const { name } of tables) {
    const [row] = await sql.unsafe(`select count(*)::int as n from "${name}"`)
    counts[name] = row!.n
  }
  return counts
}

const exists = async (table: string, column: string, value: string) =>
  (await sql.unsafe(`select 1 from ${table} where ${column}::text = $1`, [value])).length === 1

test('old events, finished deliveries and attempt logs go; pending deliveries and younger rows stay; nothing else changes', async () => {
  const webhookId = id('wh')
  await sql`insert into webhooks (id, account_id, url, events, secret_sealed) values
    (${webhookId}, ${accountId}, 'https://example.com/hook', ${['key.created']}, 'sealed')`

  // goes: an old event with no delivery; an old event whose delivery finished long ago, with its attempt
  const lone = await event(100)
  const doneEvent = await event(120)
  const done = await delivery(webhookId, doneEvent, 'succeeded', 110)
  const doneAttempt = await attempt(webhookId, done, doneEvent, 110)
  const failedEvent = await event(95)
  const failed = await delivery(webhookId, failedEvent, 'failed', 94)
  const failedAttempts = [await attempt(webhookId, failed, failedEvent, 95), await attempt(webhookId, failed, failedEvent, 94)]

  // stays: a pending delivery of an old event, with old attempt logs
  const pendingEvent = await event(200)
  const pending = await delivery(webhookId, pendingEvent, 'pending', 150)
  const pendingAttempt = await attempt(webhookId, pending, pendingEvent, 150)
  // stays: an old event whose delivery finished recently (its young attempt log keeps it); its old attempt goes
  const lateEvent = await event(91)
  const late = await delivery(webhookId, lateEvent, 'failed', 10)
  const lateOld = await attempt(webhookId, late, lateEvent, 91)
  const lateYoung = await attempt(webhookId, late, lateEvent, 10)
  // stays: young rows
  const young = await event(89)
  const youngDone = await delivery(webhookId, young, 'succeeded', 1)
  const youngAttempt = await attempt(webhookId, youngDone, young, 1)
  // the success log: an old row goes, a young one stays (a success ends its delivery: nothing else holds it)
  const oldSuccess = await success(webhookId, doneEvent, 100)
  const youngSuccess = await success(webhookId, young, 1)
  const [{ n: eventsBefore }] = await sql<{ n: number }[]>`select count(*)::int as n from events`

  const before = await otherTables()
  expect(before.analytics_daily_activations).toBeGreaterThan(0) // the rollups exist, and must survive

  // batches of 1: the job must loop, not stop after its first batch
  const result = await pruneExpired(sql, { days: 90, batch: 1 })
  expect(result).toEqual({ successes: 1, attempts: 4, deliveries: 2, events: 3, busy: false })

  for (const gone of [lone, doneEvent, failedEvent]) expect(await exists('events', 'id', gone)).toBe(false)
  for (const gone of [done, failed]) expect(await exists('webhook_deliveries', 'id', gone)).toBe(false)
  for (const gone of [doneAttempt, ...failedAttempts, lateOld]) expect(await exists('webhook_attempts', 'id', gone)).toBe(false)
  expect(await exists('webhook_attempt_log', 'id', oldSuccess)).toBe(false)
  expect(await exists('webhook_attempt_log', 'id', youngSuccess)).toBe(true)

  expect(await exists('webhook_deliveries', 'id', pending)).toBe(true)
  const [p] = await sql<{ status: string }[]>`select status from webhook_deliveries where id = ${pending}::bigint`
  expect(p!.status).toBe('pending')
  for (const kept of [pendingEvent, lateEvent, young]) expect(await exists('events', 'id', kept)).toBe(true)
  for (const kept of [late, youngDone]) expect(await exists('webhook_deliveries', 'id', kept)).toBe(true)
  for (const kept of [pendingAttempt, lateYoung, youngAttempt]) expect(await exists('webhook_attempts', 'id', kept)).toBe(true)
  const [{ n: eventsAfter }] = await sql<{ n: number }[]>`select count(*)::int as n from events`
  expect(eventsAfter).toBe(eventsBefore - 3) // the account's real (young) events are still there

  expect(await otherTables()).toEqual(before)
  // a second run finds nothing more
  expect(await pruneExpired(sql, { days: 90 })).toEqual({ successes: 0, attempts: 0, deliveries: 0, events: 0, busy: false })
})

test('RETENTION_DAYS: default 90, bounded 1..3650', () => {
  const base = { ADMIN_TOKEN: 'x'.repeat(16) }
  expect(loadConfig(base).retentionDays).toBe(90)
  expect(loadConfig({ ...base, RETENTION_DAYS: '1' }).retentionDays).toBe(1)
  expect(loadConfig({ ...base, RETENTION_DAYS: '3650' }).retentionDays).toBe(3650)
  for (const bad of ['0', '3651', '-1', 'ninety']) expect(() => loadConfig({ ...base, RETENTION_DAYS: bad })).toThrow(ConfigError)
})

test.if(postgresHere)('one node at a time: while another holds the retention lock, a run does nothing', async () => {
  const old = await event(400)
  const other = postgres(h.db.url!, { max: 1, onnotice: () => {} })
  try {
    let release!: () => void
    const released = new Promise<void>((r) => (release = r))
    let locked!: () => void
    const isLocked = new Promise<void>((r) => (locked = r))
    const holder = other.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(7202613)`
      locked()
      await released
    })
    await isLocked
    expect(await pruneExpired(sql, { days: 90 })).toEqual({ successes: 0, attempts: 0, deliveries: 0, events: 0, busy: true })
    expect(await exists('events', 'id', old)).toBe(true)
    release()
    await holder
    // two nodes racing: each row deleted once, never an error
    const both = await Promise.all([pruneExpired(sql, { days: 90, batch: 1 }), pruneExpired(sql, { days: 90, batch: 1 })])
    expect(both[0].events + both[1].events).toBe(1)
    expect(await exists('events', 'id', old)).toBe(false)
  } finally {
    await other.end()
  }
})

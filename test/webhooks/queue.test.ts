// The delivery queue on its own (no node running): batched claims, batched results with mixed
// outcomes, claims that run out, concurrent claimers, and a lone worker stopping with claimed jobs.
// A fresh database per file, rows written directly.
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import { seal } from '../../src/infra/crypto'
import type { Db } from '../../src/infra/db'
import { migrate } from '../../src/infra/migrate'
import { emitMany, offerOwnDeliveries, SYSTEM, type DeliveryTaker, type OwnDelivery } from '../../src/modules/events/outbox'
import { claimDue, logAttempts, messageOf, ownJobs, type AttemptRecord, type Job, type Verdict } from '../../src/modules/webhooks/queue'
import { recentAttempts } from '../../src/modules/webhooks/repo'
import type { AttemptOutcome } from '../../src/modules/webhooks/sender'
import type { Deps } from '../../src/deps'
import { createLogger } from '../../src/infra/log'
import { webhookHandedBack, webhookOwnDeliveries } from '../../src/infra/metrics'
import { DeliveryWorker } from '../../src/modules/webhooks/worker'
import { freshDatabase, testConfig, type TestDb } from '../support/harness'
import { LOCAL_DELIVERY } from './helpers'
import { startReceiver } from './receiver'

const KEY = new Uint8Array(32).fill(7)
const OTHER_KEY = new Uint8Array(32).fill(8)
const SECRET = 'whsec_' + Buffer.alloc(32, 1).toString('base64')
const CLAIM_MS = 60_000

let tdb: TestDb
let db: Db
beforeAll(async () => {
  tdb = await freshDatabase()
  db = await tdb.open()
  await migrate(db.sql)
  await db.sql`insert into accounts (id, name, plan) values ('acc_q', 'Queue', 'enterprise')`
}, 180_000)
afterAll(async () => {
  if (tdb?.url) await db?.close() // embedded: drop closes it
  await tdb?.drop()
})

let webhooks = 0
let webhookId = ''
/** Each test gets its own webhook (and so its own deliveries); earlier tests' rows are finished. */
beforeEach(async () => {
  await db.sql`update webhook_deliveries set status = 'cancelled' where status = 'pending'`
  await db.sql`update webhooks set is_active = false`
  webhookId = `wh_q${++webhooks}`
  await db.sql`insert into webhooks (id, account_id, url, events, secret_sealed)
    values (${webhookId}, 'acc_q', 'http://127.0.0.1:9/hook', '{key.created}', ${seal(KEY, SECRET)})`
})

/** `n` events, committed: one pending delivery each for the test's webhook. */
async function events(n: number): Promise<string[]> {
  return db.sql.begin((tx) =>
    emitMany(tx, Array.from({ length: n }, (_, i) => ({ accountId: 'acc_q', type: 'key.created' as const, data: { id: `key_${i}`, i }, actor: SYSTEM }))),
  )
}

/** A delivery row (null once it succeeded: a delivery that succeeded is deleted, its attempt log stays). */
const delivery = async (id: string) => {
  // due: neither waiting for a retry (next_attempt_at) nor claimed (leased_until)
  const [row] = await db.sql<{ status: string; attempts: number; due_in_ms: number }[]>`select status, attempts,
      extract(epoch from greatest(next_attempt_at, coalesce(leased_until, next_attempt_at)) - now()) * 1000 as due_in_ms
    from webhook_deliveries where id = ${id}`
  return row ? { ...row, due_in_ms: Number(row.due_in_ms) } : null
}
const attemptsOf = (id: string) =>
  db.sql<{ attempt: number; success: boolean; status_code: number | null; error: string | null; created_at: Date }[]>`select attempt,
      success, status_code, error, created_at from webhook_attempt_log where delivery_id = ${id} order by attempt`

const ok: AttemptOutcome = { statusCode: 200, success: true, durationMs: 3, error: null }
const err500: AttemptOutcome = { statusCode: 500, success: false, durationMs: 4, error: 'HTTP 500' }
const rec = (job: Job, outcome: AttemptOutcome, verdict: Verdict): AttemptRecord => ({ job, outcome, verdict })

test('one claim takes a batch of due deliveries for a while and signs each; a second claim gets none of them', async () => {
  const ids = await events(5)
  const jobs = await claimDue(db.sql, KEY, 10, CLAIM_MS)
  expect(new Set(jobs.map((j) => j.event.id))).toEqual(new Set(ids))
  const order = jobs.map((j) => Number(j.deliveryId))
  expect(order).toEqual([...order].sort((a, b) => a - b)) // oldest first (all due at once: by id)
  for (const job of jobs) {
    expect(job.webhookId).toBe(webhookId)
    expect(job.attempts).toBe(0)
    expect(messageOf(job).headers['webhook-signature']).toStartWith('v1,')
    const d = await delivery(job.deliveryId)
    expect(d?.status).toBe('pending')
    expect(d!.due_in_ms).toBeGreaterThan(CLAIM_MS - 10_000) // claimed, not due
  }
  expect(await claimDue(db.sql, KEY, 10, CLAIM_MS)).toEqual([])
})

test('a batch of results with mixed outcomes is written in one statement, each as its verdict says', async () => {
  await events(6)
  const [succeeded, retried, failed, stale, cancelledFail, cancelledOk] = await claimDue(db.sql, KEY, 10, CLAIM_MS)
  // Two deliveries cancelled meanwhile (their webhook was disabled while they were in flight).
  await db.sql`update webhook_deliveries set status = 'cancelled' where id in (${cancelledFail.deliveryId}, ${cancelledOk.deliveryId})`
  const recorded = await logAttempts(db.sql, [
    rec(succeeded, ok, { kind: 'succeeded' }),
    rec(retried, err500, { kind: 'retry', delayMs: 300_000 }),
    rec(failed, err500, { kind: 'failed' }),
    // Seen at claim time with another attempt count: another node took it over and logged first.
    rec({ ...stale, attempts: 3 }, ok, { kind: 'succeeded' }),
    rec(cancelledFail, err500, { kind: 'retry', delayMs: 1_000 }),
    rec(cancelledOk, ok, { kind: 'succeeded' }),
  ])
  expect([...recorded].sort()).toEqual([succeeded, retried, failed, cancelledFail, cancelledOk].map((j) => j.deliveryId).sort())

  expect(await delivery(succeeded.deliveryId)).toBeNull() // succeeded: the row goes, the attempt log stays
  const r = await delivery(retried.deliveryId)
  expect(r).toMatchObject({ status: 'pending', attempts: 1 })
  expect(r!.due_in_ms).toBeGreaterThan(250_000) // the retry delay, not the claim
  expect(r!.due_in_ms).toBeLessThanOrEqual(300_000)
  expect(await delivery(failed.deliveryId)).toMatchObject({ status: 'failed', attempts: 1 })
  expect(await delivery(stale.deliveryId)).toMatchObject({ status: 'pending', attempts: 0 }) // untouched
  expect(await delivery(cancelledFail.deliveryId)).toMatchObject({ status: 'cancelled', attempts: 1 })
  expect(await delivery(cancelledOk.deliveryId)).toBeNull()
  expect(await attemptsOf(cancelledOk.deliveryId)).toMatchObject([{ attempt: 1, success: true }])

  expect(await attemptsOf(succeeded.deliveryId)).toMatchObject([{ attempt: 1, success: true, status_code: 200, error: null }])
  expect(await attemptsOf(retried.deliveryId)).toMatchObject([{ attempt: 1, success: false, status_code: 500, error: 'HTTP 500' }])
  expect((await attemptsOf(stale.deliveryId)).length).toBe(0)
  expect((await attemptsOf(cancelledFail.deliveryId)).length).toBe(1)
})

test('successes are logged one row per batch and webhook; the webhook\'s last 20 attempts read both forms, newest first', async () => {
  const ids = await events(26)
  const jobs = await claimDue(db.sql, KEY, 30, CLAIM_MS)
  expect(jobs).toHaveLength(26)
  const log = (batch: Job[], outcome: AttemptOutcome, verdict: Verdict) => logAttempts(db.sql, batch.map((j) => rec(j, outcome, verdict)))
  // four statements, a moment apart: 10 successes, 2 retries, 10 successes, then 4 successes
  await log(jobs.slice(0, 10), ok, { kind: 'succeeded' })
  await Bun.sleep(5)
  await log(jobs.slice(10, 12), err500, { kind: 'retry', delayMs: 300_000 })
  await Bun.sleep(5)
  await log(jobs.slice(12, 22), ok, { kind: 'succeeded' })
  await Bun.sleep(5)
  await log(jobs.slice(22), ok, { kind: 'succeeded' })
  const [{ rows, n }] = await db.sql<{ rows: number; n: number }[]>`select count(*)::int as rows, sum(n)::int as n
    from webhook_successes where webhook_id = ${webhookId}`
  expect({ rows, n }).toEqual({ rows: 3, n: 24 })
  expect(await db.sql`select 1 from webhook_attempts where webhook_id = ${webhookId}`).toHaveLength(2)

  const all = await db.sql<{ id: string }[]>`select id from webhook_attempt_log where webhook_id = ${webhookId}
    order by created_at desc, id desc`
  expect(all).toHaveLength(26)
  const recent = await recentAttempts(db.sql, webhookId)
  // 4 + 10 successes, the 2 retries, then 4 of the first batch's 10
  expect(recent.map((a) => a.id)).toEqual(all.slice(0, 20).map((a) => a.id))
  expect(recent.map((a) => a.success)).toEqual([...Array(14).fill(true), false, false, ...Array(4).fill(true)])
  const first = recent[0]!
  expect(ids).toContain(first.event_id)
  expect(first).toMatchObject({ event_type: 'key.created', attempt: 1, status_code: 200, success: true, duration_ms: 3, error: null })
  expect(recent[14]).toMatchObject({ attempt: 1, status_code: 500, success: false, error: 'HTTP 500' })
  expect((await recentAttempts(db.sql, webhookId, 3)).map((a) => a.id)).toEqual(all.slice(0, 3).map((a) => a.id))
})

test('an error text holding a NUL byte (a receiver\'s body) is logged, and does not sink the batch', async () => {
  await events(2)
  const [a, b] = await claimDue(db.sql, KEY, 10, CLAIM_MS)
  const nul: AttemptOutcome = { statusCode: 500, success: false, durationMs: 2, error: 'HTTP 500: bad\u0000body' }
  const recorded = await logAttempts(db.sql, [rec(a, nul, { kind: 'retry', delayMs: 1_000 }), rec(b, ok, { kind: 'succeeded' })])
  expect([...recorded].sort()).toEqual([a.deliveryId, b.deliveryId].sort())
  expect(await attemptsOf(a.deliveryId)).toMatchObject([{ attempt: 1, success: false, status_code: 500, error: 'HTTP 500: bad\ufffdbody' }])
})

test('a claim whose node died runs out: the delivery is claimed again once its claim has ended, and only then', async () => {
  const [eventId] = await events(1)
  const [dead] = await claimDue(db.sql, KEY, 10, 400) // this node never sends nor records
  expect(dead.event.id).toBe(eventId)
  expect(await claimDue(db.sql, KEY, 10, CLAIM_MS)).toEqual([]) // still claimed
  const [{ until }] = await db.sql<{ until: Date }[]>`select leased_until as until from webhook_deliveries where id = ${dead.deliveryId}`

  let again: Job[] = []
  for (const start = Date.now(); again.length === 0 && Date.now() - start < 10_000; ) {
    await Bun.sleep(50)
    again = await claimDue(db.sql, KEY, 10, CLAIM_MS)
  }
  expect(again.map((j) => [j.deliveryId, j.attempts, j.event.id])).toEqual([[dead.deliveryId, 0, eventId]])
  const [{ now }] = await db.sql<{ now: Date }[]>`select now()`
  expect(now.getTime()).toBeGreaterThanOrEqual(until.getTime())

  // The new claimer succeeds; the dead one's late result (same attempt number) is then dropped.
  expect([...(await logAttempts(db.sql, [rec(again[0], ok, { kind: 'succeeded' })]))]).toEqual([dead.deliveryId])
  expect([...(await logAttempts(db.sql, [rec(dead, err500, { kind: 'retry', delayMs: 1 })]))]).toEqual([])
  expect(await delivery(dead.deliveryId)).toBeNull() // succeeded
  expect(await attemptsOf(dead.deliveryId)).toMatchObject([{ attempt: 1, success: true }])
})

test('a delivery acknowledged 2xx is never claimed again, even once its claim would have run out', async () => {
  await events(1)
  const [job] = await claimDue(db.sql, KEY, 10, 200)
  await logAttempts(db.sql, [rec(job, ok, { kind: 'succeeded' })])
  await Bun.sleep(300)
  expect(await claimDue(db.sql, KEY, 10, CLAIM_MS)).toEqual([])
})

test('claimers racing over the same due rows split them: each delivery claimed exactly once', async () => {
  const ids = await events(120)
  const batches = await Promise.all(Array.from({ length: 6 }, () => claimDue(db.sql, KEY, 30, CLAIM_MS)))
  const claimed = batches.flat().map((j) => j.event.id)
  expect(claimed.length).toBe(120)
  expect(new Set(claimed)).toEqual(new Set(ids))
})

test('deliveries of an inactive webhook are cancelled by the claim, not sent', async () => {
  await events(2)
  await db.sql`update webhooks set is_active = false where id = ${webhookId}`
  expect(await claimDue(db.sql, KEY, 10, CLAIM_MS)).toEqual([])
  const rows = await db.sql<{ status: string }[]>`select status from webhook_deliveries where webhook_id = ${webhookId}`
  expect(rows.map((r) => r.status)).toEqual(['cancelled', 'cancelled'])
})

test('a secret sealed under another SECRET_KEY fails its deliveries (logged) instead of blocking the queue', async () => {
  await events(2)
  expect(await claimDue(db.sql, OTHER_KEY, 10, CLAIM_MS)).toEqual([])
  const rows = await db.sql<{ id: string; status: string; attempts: number }[]>`select id, status, attempts from webhook_deliveries
    where webhook_id = ${webhookId} order by id`
  expect(rows.map((r) => [r.status, r.attempts])).toEqual([['failed', 1], ['failed', 1]])
  for (const r of rows) {
    expect(await attemptsOf(r.id)).toMatchObject([{ attempt: 1, success: false, status_code: null, error: expect.stringContaining('cannot be decrypted') }])
  }
})

/** The test's webhook pointed at a receiver that answers 200 after `ms`. */
async function slowReceiver(ms: number) {
  const rx = startReceiver()
  rx.expect('/slow', SECRET, async () => {
    await Bun.sleep(ms)
    return 200
  })
  await db.sql`update webhooks set url = ${rx.url('/slow')} where id = ${webhookId}`
  return rx
}

/** A worker with one slot (so it claims two: one sent, one waiting) and no poll; only the deps it uses. */
function oneSlotWorker(options: { startByMs?: number } = {}) {
  const deps = { config: testConfig(LOCAL_DELIVERY), db, sql: db.sql, log: createLogger('silent'), secretKey: KEY } as unknown as Deps
  return new DeliveryWorker(deps, { concurrency: 1, pollMs: 60_000, ...options }).start()
}

test('a worker stopping releases the jobs it claimed but had not started: they are due again at once', async () => {
  const rx = await slowReceiver(400)
  try {
    const ids = await events(3)
    // it claims two (one sent, one waiting) and leaves the third
    const worker = await oneSlotWorker()
    await rx.waitFor((all) => all.length >= 1, 10_000, 'the first attempt')
    await worker.stop(5_000) // the attempt in flight finishes
    expect(rx.received.length).toBe(1)
    expect(rx.received[0].error).toBeNull()

    const rows = await db.sql<{ event_id: string; status: string; attempts: number; due: boolean }[]>`select event_id, status,
        attempts, next_attempt_at <= now() and (leased_until is null or leased_until <= now()) as due
      from webhook_deliveries where webhook_id = ${webhookId} order by id`
    // the one sent succeeded (its row is gone); the other two are due again, never attempted
    const sent = rx.received[0].payload!.id
    expect(new Set(rows.map((r) => r.event_id))).toEqual(new Set(ids.filter((id) => id !== sent)))
    expect(rows.map((r) => [r.status, r.attempts, r.due])).toEqual([['pending', 0, true], ['pending', 0, true]])
  } finally {
    await rx.stop()
  }
})

test('a claimed job that cannot start in time is handed back unsent, then delivered once like the rest', async () => {
  const rx = await slowReceiver(500)
  const handedBack = async () => (await webhookHandedBack.get()).values[0]?.value ?? 0
  try {
    const ids = await events(3)
    const before = await handedBack()
    // One slot and a 150 ms start deadline (20 s in production): the job claimed beside the one being
    // sent is late by the time the slot frees, so it goes back to the queue and is claimed again.
    const worker = await oneSlotWorker({ startByMs: 150 })
    try {
      await rx.waitFor((all) => all.length >= 3, 15_000, 'three deliveries')
    } finally {
      await worker.stop(5_000) // waits for the last attempt to be logged
    }
    expect(await handedBack()).toBeGreaterThan(before)
    // each event sent once, logged once as a first attempt, its queue row gone
    expect(rx.received.map((r) => r.payload!.id).sort()).toEqual([...ids].sort())
    const attempts = await db.sql<{ event_id: string; attempt: number; success: boolean }[]>`select event_id, attempt, success
      from webhook_attempt_log where webhook_id = ${webhookId} order by event_id`
    expect(attempts.map((a) => [a.event_id, a.attempt, a.success])).toEqual([...ids].sort().map((id) => [id, 1, true]))
    expect(await db.sql`select 1 from webhook_deliveries where webhook_id = ${webhookId}`).toHaveLength(0)
  } finally {
    await rx.stop()
  }
})

/** A stand-in for a node's worker that holds `room`, and records what it is given back and handed. */
function recordingTaker(room: number, claimMs: number) {
  const handed: { held: number; own: OwnDelivery[]; committed: boolean }[] = []
  let released = 0
  const taker: DeliveryTaker = {
    claimMs,
    reserve: () => room,
    release: (n) => void (released += n),
    settle: (held, own, committed) => void handed.push({ held, own, committed }),
  }
  return { taker, handed, released: () => released }
}

test('a transaction\'s own deliveries: as many as its node\'s worker has room for are written taken and handed over at commit; the rest are claimed', async () => {
  const { taker, handed, released } = recordingTaker(3, 2_000)
  const undo = offerOwnDeliveries(db.sql, taker)
  let ids: string[]
  try {
    ids = await events(5)
  } finally {
    undo()
  }
  expect(released()).toBe(0) // room for 3, 3 taken
  expect(handed).toHaveLength(1)
  const { held, own, committed } = handed[0]!
  expect({ held, committed, taken: own.length }).toEqual({ held: 3, committed: true, taken: 3 })
  const [{ created_at }] = await db.sql<{ created_at: Date }[]>`select created_at from events where id = ${ids[0]!}`
  for (const d of own) {
    expect(d.webhookId).toBe(webhookId)
    expect(d.url).toBe('http://127.0.0.1:9/hook')
    const i = ids.indexOf(d.event.id)
    expect(i).toBeGreaterThanOrEqual(0)
    expect(d.event).toEqual({ id: ids[i]!, type: 'key.created', createdAt: created_at, actor: SYSTEM, data: { id: `key_${i}`, i } })
  }

  // the other two are due now, for any node's claim; the taken ones are not (their node sends them)
  const takenIds = new Set(own.map((d) => d.deliveryId))
  const claimed = await claimDue(db.sql, KEY, 10, CLAIM_MS)
  expect(claimed.map((j) => j.event.id).sort()).toEqual(ids.filter((id) => !own.some((d) => d.event.id === id)).sort())
  // the node never sent them (it died): due for anyone when the claim would have ended
  await Bun.sleep(2_100)
  const later = await claimDue(db.sql, KEY, 10, CLAIM_MS)
  expect(new Set(later.map((j) => j.deliveryId))).toEqual(takenIds)
  // and the claim signs what the node would have: the same event, the same body
  const { jobs } = ownJobs(KEY, own)
  for (const job of later) {
    const mine = jobs.find((j) => j.deliveryId === job.deliveryId)!
    expect(messageOf(mine, 1_000_000).body).toBe(messageOf(job, 1_000_000).body)
    expect(messageOf(mine, 1_000_000).headers).toEqual(messageOf(job, 1_000_000).headers)
  }
})

test('a transaction that rolls back hands nothing over, gives its room back and leaves no delivery', async () => {
  const { taker, handed, released } = recordingTaker(10, CLAIM_MS)
  const undo = offerOwnDeliveries(db.sql, taker)
  try {
    const failing = db.sql.begin(async (tx) => {
      await emitMany(tx, [0, 1].map((i) => ({ accountId: 'acc_q', type: 'key.created' as const, data: { id: `key_${i}` }, actor: SYSTEM })))
      throw new Error('rolled back')
    })
    await expect(failing).rejects.toThrow('rolled back')
  } finally {
    undo()
  }
  expect(released()).toBe(8) // 10 held, 2 written
  expect(handed.map((h) => [h.held, h.own.length, h.committed])).toEqual([[2, 2, false]])
  expect(await db.sql`select 1 from webhook_deliveries where webhook_id = ${webhookId}`).toHaveLength(0)
})

test('a worker sends its node\'s own deliveries at commit, with no claim; stopping releases those not started: due at once', async () => {
  const rx = await slowReceiver(400)
  const own = async () => (await webhookOwnDeliveries.get()).values[0]?.value ?? 0
  try {
    const worker = await oneSlotWorker()
    // its first claim (work from before a restart: none) holds room until it is back
    while (worker['claims'].size > 0) await Bun.sleep(5)
    const before = await own()
    const ids = await events(2) // one slot and one waiting: both taken
    expect((await own()) - before).toBe(2)
    await rx.waitFor((all) => all.length >= 1, 10_000, 'the first attempt')
    await worker.stop(5_000) // the attempt in flight finishes
    expect(rx.received.length).toBe(1)
    expect(rx.received[0]!.error).toBeNull() // signed with the webhook's secret
    const sent = rx.received[0]!.payload!.id
    const rows = await db.sql<{ event_id: string; status: string; attempts: number; due: boolean }[]>`select event_id, status,
        attempts, next_attempt_at <= now() and (leased_until is null or leased_until <= now()) as due
      from webhook_deliveries where webhook_id = ${webhookId} order by id`
    expect(rows.map((r) => [r.event_id, r.status, r.attempts, r.due])).toEqual([[ids.find((id) => id !== sent)!, 'pending', 0, true]])
  } finally {
    await rx.stop()
  }
})

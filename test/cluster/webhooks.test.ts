// Deliveries across restarts and nodes. With DATABASE_URL (CI): real server processes on one Postgres.
// Embedded: the restart is a real process restart on the same DATA_DIR; the two "nodes" are two
// in-process nodes on the one PGlite database (PGlite cannot be shared between processes).
import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { client, createAccount, freshDatabase, newProduct, realPostgres, testConfig, type Client } from '../support/harness'
import { newWebhook } from '../webhooks/helpers'
import { freePort, spawnServer, type ServerProcess } from '../webhooks/processes'
import { eventually, startReceiver } from '../webhooks/receiver'

const cleanups: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {})
})

const newAccount = async (call: Client, plan = 'growth') => (await createAccount(call, plan, 'Cluster')).token

test('a delivery whose receiver is down survives a server restart and arrives after it', async () => {
  const env: Record<string, string> = {
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    WEBHOOK_RETRY_DELAYS_MS: Array(10).fill('300').join(','),
  }
  if (realPostgres) {
    const db = await freshDatabase()
    cleanups.push(() => db.drop())
    env.DATABASE_URL = db.url!
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'keyward-wh-restart-'))
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
    env.DATA_DIR = dir
  }
  const port = freePort()
  const first = await spawnServer(env)
  cleanups.push(() => first.stop())
  const call1 = client(first.url)
  const token = await newAccount(call1)
  const wh = await newWebhook(call1, token, `http://127.0.0.1:${port}/restart`, ['product.created'])
  const product = await newProduct(call1, token)

  // the receiver is down: at least one failed attempt is logged before the restart
  const before = await eventually(async () => {
    const d = await call1('GET', `/v1/webhooks/${wh.id}`, { token })
    return d.body.deliveries.length ? d.body.deliveries : null
  }, 10_000, 'a failed attempt')
  expect(before[0].success).toBe(false)
  expect(before[0].status_code).toBeNull()
  expect(await first.stop()).toBe(0)

  const rx = startReceiver(port)
  cleanups.push(() => rx.stop())
  rx.expect('/restart', wh.secret)
  const second = await spawnServer(env)
  cleanups.push(() => second.stop())

  await rx.waitFor(() => rx.on('/restart').length >= 1, 15_000, 'the delivery after the restart')
  const [got] = rx.on('/restart')
  expect(got.error).toBeNull()
  expect(got.payload!.type).toBe('product.created')
  expect(got.payload!.data).toEqual(product)
  expect(got.headers['webhook-id']).toBe(before[0].event_id)

  const call2 = client(second.url)
  const after = await eventually(async () => {
    const d = await call2('GET', `/v1/webhooks/${wh.id}`, { token })
    return d.body.deliveries[0]?.success ? d.body.deliveries : null
  }, 10_000, 'the successful attempt to be logged')
  expect(after[0].attempt).toBe(after.length)
  expect(after.length).toBeGreaterThanOrEqual(2)
  expect(new Set(after.map((d: any) => d.event_id)).size).toBe(1)
  expect(await second.stop()).toBe(0)
  await Bun.sleep(300)
  expect(rx.on('/restart')).toHaveLength(1)
}, 120_000)

test('two nodes delivering at once: 500 events, each delivered exactly once, no duplicate attempts', async () => {
  const env = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_DELAYS_MS: '200,200,200' }
  const db = await freshDatabase()
  cleanups.push(() => db.drop())
  let urls: string[]
  let query: postgres.Sql
  let servers: ServerProcess[] = []
  if (realPostgres) {
    servers = await Promise.all([spawnServer({ ...env, DATABASE_URL: db.url! }), spawnServer({ ...env, DATABASE_URL: db.url! })])
    for (const s of servers) cleanups.push(() => s.stop())
    urls = servers.map((s) => s.url)
    query = postgres(db.url!, { max: 1, onnotice: () => {} })
    cleanups.push(() => query.end())
  } else {
    const shared = await db.open()
    const config = testConfig(env)
    const nodes: Node[] = []
    for (let i = 0; i < 2; i++) nodes.push(await startNode(config, { db: shared, log: createLogger(config.logLevel) }))
    for (const n of nodes) cleanups.push(() => n.stop())
    urls = nodes.map((n) => n.url)
    query = shared.sql
  }
  const calls = urls.map(client)
  const rx = startReceiver()
  cleanups.push(() => rx.stop())

  const token = await newAccount(calls[0], 'enterprise')
  const wh = await newWebhook(calls[1], token, rx.url('/pair'), ['product.created'])
  rx.expect('/pair', wh.secret)

  // 500 events, written through both nodes, 16 at a time
  const TOTAL = 500
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < TOTAL) {
        const i = next++
        const res = await calls[i % 2]('POST', '/v1/products', { token, body: { name: `p${i}`, slug: `p-${i}` } })
        if (res.status !== 201) throw new Error(`product ${i}: ${res.status}`)
      }
    }),
  )

  await rx.waitFor(() => rx.on('/pair').length >= TOTAL, 60_000, `${TOTAL} deliveries`)
  await eventually(async () => {
    const [{ n }] = await query`select count(*)::int as n from webhook_deliveries`
    return n === 0
  }, 10_000, 'every delivery to be logged as succeeded (its row then goes)')
  await Bun.sleep(300)

  const got = rx.on('/pair')
  expect(got).toHaveLength(TOTAL)
  expect(got.every((r) => r.error === null)).toBe(true)
  expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(TOTAL)
  const [stats] = await query<{ deliveries: number; attempts: number; delivered: number; first_attempts: number; events: number }[]>`select
      (select count(*)::int from webhook_deliveries) as deliveries,
      (select count(*)::int from webhook_attempt_log) as attempts,
      (select count(distinct delivery_id)::int from webhook_attempt_log) as delivered,
      (select count(*)::int from webhook_attempt_log where attempt = 1 and success) as first_attempts,
      (select count(*)::int from events where type = 'product.created') as events`
  // every delivery succeeded at its first attempt: its attempt log stays, its queue row is gone
  expect(stats).toEqual({ deliveries: 0, attempts: TOTAL, delivered: TOTAL, first_attempts: TOTAL, events: TOTAL })

  if (servers.length) {
    // each process counts its own attempts: together exactly one per event
    const counts = await Promise.all(
      urls.map(async (u) => {
        const text = await (await fetch(`${u}/metrics`)).text()
        return Number(/keyward_webhook_deliveries_total\{outcome="success"\} (\d+)/.exec(text)?.[1] ?? 0)
      }),
    )
    console.log(`deliveries per node: ${counts.join(' + ')}`)
    expect(counts[0] + counts[1]).toBe(TOTAL)
  }
}, 180_000)

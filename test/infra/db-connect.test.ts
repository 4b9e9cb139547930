// How the Postgres pool opens connections (src/infra/pg-socket.ts): an endpoint that accepts and closes
// fails calls instead of making them wait forever; a new connection the server is silent on is retried
// with the query it carries (never sent), instead of failing that query.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { connectPostgres, isConnectionError } from '../../src/infra/db'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { client, freshDatabase, newKey, newProduct, testConfig, ADMIN_TOKEN } from '../support/harness'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { requireEnvironment } from '../support/environment'

/** These tests need a real Postgres server (PGlite is one process in memory). */
const postgresHere = await requireEnvironment('infra/db-connect', ['postgres'])

setDefaultTimeout(60_000)
const cleanups: (() => Promise<unknown> | void)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

/** Settles with the call's outcome, or 'pending' if it has not returned within `ms`. */
async function within<T>(ms: number, p: Promise<T>): Promise<{ value?: T; error?: unknown; ms: number } | 'pending'> {
  const t0 = performance.now()
  let timer: Timer | undefined
  const late = new Promise<'pending'>((r) => (timer = setTimeout(r, ms, 'pending')))
  const settled = p.then(
    (value) => ({ value, ms: performance.now() - t0 }),
    (error) => ({ error, ms: performance.now() - t0 }),
  )
  return Promise.race([settled, late]).finally(() => clearTimeout(timer))
}

test('an endpoint that accepts connections and closes them at once: a query fails with a connection error instead of waiting forever', async () => {
  // Nothing behind the proxy is ever reached: every connection is closed as soon as it is accepted.
  const proxy = await startTcpProxy('127.0.0.1', 9)
  proxy.acceptAndClose()
  const db = connectPostgres(`postgres://postgres@127.0.0.1:${proxy.port}/postgres`, 2)
  cleanups.push(() => proxy.close())
  const r = await within(10_000, db.sql`select 1`.then(() => 'answered'))
  expect(r).not.toBe('pending')
  if (r === 'pending') return
  expect(r.value).toBeUndefined()
  expect(isConnectionError(r.error)).toBe(true)
  console.log(`accept-and-close: query rejected (${(r.error as { code?: string }).code}) after ${r.ms.toFixed(0)} ms`)
  await db.close()
})

test.if(postgresHere)('a new connection the server is silent on is retried with its unsent query, which then succeeds', async () => {
  const base = await freshDatabase()
  cleanups.push(() => base.drop())
  const u = new URL(base.url!)
  const proxy = await startTcpProxy(u.hostname, Number(u.port || 5432))
  cleanups.push(() => proxy.close())
  // The first connection hears nothing. The driver's own limit would fail the query after connect_timeout;
  // the pool retries once the startup wait (here 300 ms) has passed with the server alive.
  proxy.silenceNext(1)
  const db = connectPostgres(`postgres://postgres@127.0.0.1:${proxy.port}${u.pathname}`, 1, { startupMs: 300, budgetMs: 30_000, probeMs: 250 })
  const r = await within(10_000, db.sql<{ n: number }[]>`select 41 + 1 as n`)
  expect(r).not.toBe('pending')
  if (r === 'pending') return
  expect(r.error).toBeUndefined()
  expect(r.value![0]!.n).toBe(42)
  await db.close()
})

test.if(postgresHere)('a node whose Postgres accepts and closes: a new device gets 503 (not a wait), and validates once Postgres is back', async () => {
  const base = await freshDatabase()
  cleanups.push(() => base.drop())
  const u = new URL(base.url!)
  const proxy: TcpProxy = await startTcpProxy(u.hostname, Number(u.port || 5432))
  cleanups.push(() => proxy.close())
  const db = connectPostgres(`postgres://postgres@127.0.0.1:${proxy.port}${u.pathname}`, 4)
  const node: Node = await startNode(testConfig({ REDIS_URL: '', NATS_URL: '' }), { db, log: createLogger('silent') })
  cleanups.push(async () => {
    await node.stop()
    await db.close()
  })
  const call = client(node.url)
  const acct = await call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Flaky', plan: 'growth' } })
  const token = acct.body.api_key.token
  const product = await newProduct(call, token)
  const key = await newKey(call, token, product.id, { activation_limit: 10 })
  const validate = (fp: string) => call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fp.repeat(64) } })
  expect((await validate('a')).body.valid).toBe(true)

  proxy.acceptAndClose()
  const r = await within(10_000, validate('b'))
  expect(r).not.toBe('pending')
  if (r === 'pending') return
  expect(r.value!.status).toBe(503)
  expect(r.value!.body.code).toBe('unavailable')
  console.log(`new device while Postgres accepts and closes: ${r.value!.status} after ${r.ms.toFixed(0)} ms`)
  expect((await validate('a')).body.valid).toBe(true) // the known device still answers from memory

  proxy.restore()
  let back = await validate('b')
  for (let i = 0; i < 50 && back.status !== 200; i++) back = (await Bun.sleep(100), await validate('b'))
  expect(back.status).toBe(200)
  expect(back.body.valid).toBe(true)
})

// The daily validate quota survives a Redis restart (Redis comes back empty) and a node restart: the
// counters' batched flush adds each day's count to Postgres, and a missing counter is restored from it.
// The Redis here is a private redis-server on a free port, started and stopped by this file.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { client, newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { waitUntil } from '../support/wait'
import { freePort } from '../support/ports'
import { requireEnvironment } from '../support/environment'

setDefaultTimeout(120_000)
const hasRedisServer = await requireEnvironment('infra/daily-quota', ['redis-server'])
const cleanups: (() => Promise<unknown> | void)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

/** A throwaway redis-server without persistence: stopping it loses every key, as a restart of a cache does. */
async function startRedis(port: number) {
  const proc = Bun.spawn(['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdout: 'ignore',
    stderr: 'ignore',
  })
  for (let i = 0; i < 100; i++) {
    const up = await Bun.connect({ hostname: '127.0.0.1', port, socket: { data() {} } }).then(
      (s) => (s.end(), true),
      () => false,
    )
    if (up) break
    await Bun.sleep(50)
  }
  return {
    async stop() {
      proc.kill('SIGKILL')
      await proc.exited
    },
  }
}

const until = (cond: () => boolean | Promise<boolean>, ms = 15_000) => waitUntil(cond, ms)

/** An account on the free plan (500 validate calls a day) with one key, and a validate call for it. */
async function freeAccount(h: Harness) {
  const acct = await h.account('free')
  const product = await newProduct(h.call, acct.token)
  const key = await newKey(h.call, acct.token, product.id)
  const body = { key: key.key_value, device_fingerprint: 'c'.repeat(64) }
  return { id: acct.id, validate: (node: Node = h.node) => client(node.url)('POST', '/v1/validate', { token: acct.token, body }) }
}

async function useUpQuota(validate: () => Promise<{ status: number }>) {
  const statuses = new Map<number, number>()
  for (let i = 0; i < 500; i++) {
    const { status } = await validate()
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
  }
  expect(Object.fromEntries(statuses)).toEqual({ 200: 500 })
  expect((await validate()).status).toBe(429)
}

const persisted = async (h: Harness, accountId: string) => {
  const [row] = await h.node.deps.sql<{ calls: number }[]>`select calls::int as calls from daily_validate_calls where account_id = ${accountId}`
  return row?.calls ?? 0
}

test.if(hasRedisServer)('Redis restarted empty mid-day: an account that used 500 of 500 still gets 429, on this node and on another', async () => {
  const port = freePort()
  let redis = await startRedis(port)
  cleanups.push(() => redis.stop())
  const h = await startHarness({ REDIS_URL: `redis://127.0.0.1:${port}`, NATS_URL: '' })
  cleanups.push(() => h.close())
  const acct = await freeAccount(h)
  await useUpQuota(acct.validate)

  // the batched flush (every FLUSH_INTERVAL_MS) carries the day's count to Postgres
  await until(async () => (await h.node.deps.counters.flush(), (await persisted(h, acct.id)) >= 500))
  expect(await persisted(h, acct.id)).toBe(500) // a refused call is not counted

  await redis.stop()
  await until(() => h.node.deps.counters.state() === 'down')
  redis = await startRedis(port) // same port, no data
  await until(() => h.node.deps.counters.state() === 'ok')

  const after = await acct.validate()
  expect(after.status).toBe(429)
  expect(await h.node.deps.counters.today(acct.id)).toBeGreaterThanOrEqual(500)
  // a node that never saw this account (a restarted one, or another) reads the restored count
  const other = await startNode(h.config, { db: h.node.deps.db, log: createLogger('silent') })
  cleanups.push(() => other.stop())
  expect((await acct.validate(other)).status).toBe(429)
})

/**
 * Calls spread over `count` nodes, one node going idle (its unspent reserved calls go back at a flush),
 * then Redis restarts empty, with `callsWhileDown` calls decided locally meanwhile. Counts every 200
 * until the first 429s, on every node: exactly 500, whatever each node held when Redis went away.
 */
async function quotaAcrossRedisRestart(count: number, callsWhileDown: number) {
  const port = freePort()
  let redis = await startRedis(port)
  cleanups.push(() => redis.stop())
  const h = await startHarness({ REDIS_URL: `redis://127.0.0.1:${port}`, NATS_URL: '' })
  cleanups.push(() => h.close())
  const nodes = [h.node]
  for (let i = 1; i < count; i++) {
    const other = await startNode(h.config, { db: h.node.deps.db, log: createLogger('silent') })
    cleanups.push(() => other.stop())
    nodes.push(other)
  }
  const acct = await freeAccount(h)
  let valid = 0
  const call = async (node: Node) => {
    const { status } = await acct.validate(node)
    if (status === 200) valid++
    else expect(status).toBe(429)
    return status
  }
  const idle = nodes.at(-1)!
  for (let i = 0; i < 150; i++) await call(nodes[i % count]!)
  if (count > 1) for (let i = 0; i < 30; i++) await call(nodes[0]!)
  await idle.deps.counters.flush()
  await idle.deps.counters.flush() // idle since the last flush: its lease goes back to Redis
  for (const n of nodes) await n.deps.counters.flush()
  await until(async () => (await persisted(h, acct.id)) >= valid)
  if (count > 1) for (let i = 0; i < 10; i++) await call(nodes[0]!) // the busy node keeps a lease

  await redis.stop()
  await until(() => nodes.every((n) => n.deps.counters.state() === 'down'))
  for (let i = 0; i < callsWhileDown; i++) await call(nodes[i % count]!) // counted locally while Redis is away
  redis = await startRedis(port) // same port, no data
  await until(() => nodes.every((n) => n.deps.counters.state() === 'ok'))

  for (let i = 0; i < 600; i++) if ((await call(nodes[i % count]!)) === 429) break
  for (const n of nodes) await n.deps.counters.flush()
  for (let i = 0; i < 600; i++) if ((await call(nodes[i % count]!)) === 429) break
  expect(valid).toBe(500)
  for (const n of nodes) expect((await acct.validate(n)).status).toBe(429)
  for (const n of nodes) await n.deps.counters.flush()
  await until(async () => (await persisted(h, acct.id)) >= 500)
  expect(await persisted(h, acct.id)).toBe(500)
}

test.if(hasRedisServer)('Redis restarted empty mid-day, one node: exactly 500 of 500 calls (calls given back before the restart are not lost)', () =>
  quotaAcrossRedisRestart(1, 0))

test.if(hasRedisServer)('Redis restarted empty mid-day, one node, calls while it is away: exactly 500 of 500 calls', () =>
  quotaAcrossRedisRestart(1, 20))

test.if(hasRedisServer)('Redis restarted empty mid-day, two nodes, one holding reserved calls: exactly 500 of 500 calls', () =>
  quotaAcrossRedisRestart(2, 20))

test('embedded counters: a restarted node keeps the day\'s quota (restored from Postgres at start)', async () => {
  const h = await startHarness({ REDIS_URL: '', NATS_URL: '' })
  cleanups.push(() => h.close())
  const acct = await freeAccount(h)
  await useUpQuota(acct.validate)
  await h.node.deps.counters.flush()
  expect(await persisted(h, acct.id)).toBe(500)

  const db = h.node.deps.db
  await h.node.stop()
  // the harness's stop closes what it opened; reopen for real Postgres, reuse the embedded one
  const restarted = await startNode(h.config, { db: h.db.url ? undefined : db, log: createLogger('silent') })
  h.node = restarted
  expect(await restarted.deps.counters.today(acct.id)).toBe(500)
  expect((await acct.validate(restarted)).status).toBe(429)
})

// RedisCounters against the real Redis: the daily limit holds exactly across nodes, counts are shared,
// and a lost Redis means local counting (no error, no hang) until it is back.
import { afterAll, describe, expect, test } from 'bun:test'
import { createLogger } from '../../src/infra/log'
import { RedisCounters } from '../../src/infra/redis-counters'
import { startTcpProxy } from '../support/tcp-proxy'
import { waitUntil as until } from '../support/wait'
import { requireEnvironment } from '../support/environment'

const redisUrl = process.env.REDIS_URL
const cluster = await requireEnvironment('infra/redis-counters', ['redis'])

const log = createLogger('silent')
const account = () => `acct_test${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`

describe.if(cluster)('RedisCounters on real Redis', () => {
  const open: RedisCounters[] = []
  const start = async (url = redisUrl!, commandTimeoutMs?: number) => {
    const c = await RedisCounters.start({ url, log, commandTimeoutMs })
    open.push(c)
    return c
  }
  afterAll(async () => {
    for (const c of open) await c.close()
  })

  test('three nodes share one daily limit exactly, even racing', async () => {
    // Exact while Redis answers within the command bound. A reservation that times out on a loaded
    // machine may still have run in Redis: its calls are lost to the day (an under-grant, never an
    // over-grant; the 'Redis lost' test below covers that side), so this test gives Redis time.
    const nodes = [await start(redisUrl, 10_000), await start(redisUrl, 10_000), await start(redisUrl, 10_000)]
    const acct = account()
    const results = await Promise.all(Array.from({ length: 600 }, (_, i) => nodes[i % 3]!.take(acct, 500)))
    expect(results.filter(Boolean).length).toBe(500)
    // and sequentially, with flushes in between (idle leases come back)
    const acct2 = account()
    let ok = 0
    for (let i = 0; i < 600; i++) {
      if (await nodes[i % 3]!.take(acct2, 500)) ok++
      if (i % 97 === 0) await nodes[i % 3]!.flush()
    }
    expect(ok).toBe(500)
    for (const n of nodes) await n.flush()
    expect(await nodes[0]!.today(acct)).toBe(500)
    expect(await nodes[1]!.today(acct2)).toBe(500)
  })

  test('unlimited accounts count without touching the quota', async () => {
    const a = await start()
    const acct = account()
    for (let i = 0; i < 1000; i++) expect(a.take(acct, null)).toBe(true)
    expect(await a.today(acct)).toBe(1000)
    await a.flush()
    expect(await a.today(acct)).toBe(1000)
  })

  test('Redis lost: local counting, no error and no hang; counts reach Redis when it is back', async () => {
    const u = new URL(redisUrl!)
    const proxy = await startTcpProxy(u.hostname, Number(u.port || 6379))
    try {
      const c = await start(proxy.url('redis'))
      const other = await start()
      expect(c.state()).toBe('ok')
      const acct = account()
      for (let i = 0; i < 10; i++) expect(await c.take(acct, 1000)).toBe(true)
      await c.flush()
      proxy.cut()
      await until(() => c.state() === 'down')
      const t0 = performance.now()
      for (let i = 0; i < 200; i++) expect(await c.take(acct, 1000)).toBe(true)
      await c.flush() // nothing to do while down; must not throw
      console.log(`200 takes with Redis down: ${(performance.now() - t0).toFixed(1)} ms`)
      expect(await c.today(acct)).toBeGreaterThanOrEqual(210)
      proxy.restore()
      await until(() => c.state() === 'ok')
      await c.flush()
      expect(await other.today(acct)).toBe(210)
    } finally {
      proxy.close()
    }
  })
})

describe.if(cluster)('RedisCounters with a hung Redis', () => {
  test('a Redis that stops answering costs at most one bounded wait, then local counting', async () => {
    const u = new URL(redisUrl!)
    const proxy = await startTcpProxy(u.hostname, Number(u.port || 6379))
    const c = await RedisCounters.start({ url: proxy.url('redis'), log })
    try {
      const acct = account()
      // limit 40: leases of 2 or 3, so the node keeps needing Redis
      for (let i = 0; i < 5; i++) expect(await c.take(acct, 40)).toBe(true)
      proxy.stall()
      const t0 = performance.now()
      let ok = 0
      for (let i = 0; i < 100; i++) if (await c.take(acct, 40)) ok++
      await c.flush()
      const ms = performance.now() - t0
      console.log(`100 takes against a hung Redis took ${ms.toFixed(0)} ms (command timeout 250 ms); ${ok} allowed locally`)
      expect(ok).toBe(35) // the local estimate still holds this node to the limit
      proxy.restore()
    } finally {
      await c.close()
      proxy.close()
    }
  })
})

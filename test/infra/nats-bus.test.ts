// NatsBus against the real NATS server: acks from every live member, membership from heartbeats,
// resync after a cut connection, and the change sequence catching a message that never arrived.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { BusMessage } from '../../src/infra/bus'
import type { Db } from '../../src/infra/db'
import { createLogger } from '../../src/infra/log'
import { migrate } from '../../src/infra/migrate'
import { NatsBus } from '../../src/infra/nats-bus'
import { freshDatabase, type TestDb } from '../support/harness'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'

const natsUrl = process.env.NATS_URL
const cluster = !!(process.env.DATABASE_URL && natsUrl)

test('NatsBus tests run only with DATABASE_URL and NATS_URL set (cluster mode)', () => {
  expect(typeof cluster).toBe('boolean')
})

const log = createLogger('silent')
const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time')
    await Bun.sleep(20)
  }
}

describe.if(cluster)('NatsBus on real NATS', () => {
  let tdb: TestDb
  let db: Db
  let proxy: TcpProxy
  const buses: NatsBus[] = []
  const start = async (url = natsUrl!, extra: { ackTimeoutMs?: number } = {}) => {
    const bus = await NatsBus.start({ url, sql: db.sql, log, heartbeatMs: 200, seqPollMs: 200, ackTimeoutMs: 500, ...extra })
    buses.push(bus)
    return bus
  }
  const record = (bus: NatsBus) => {
    const got: BusMessage[] = []
    bus.subscribe((m) => got.push(m))
    return got
  }

  beforeAll(async () => {
    tdb = await freshDatabase()
    db = await tdb.open()
    await migrate(db.sql)
    const u = new URL(natsUrl!)
    proxy = await startTcpProxy(u.hostname, Number(u.port || 4222))
  })
  afterAll(async () => {
    for (const b of buses) await b.close()
    proxy?.close()
    await db?.close()
    await tdb?.drop()
  })

  test('publish returns after every live member applied the message', async () => {
    const [a, b, c] = [await start(), await start(), await start()]
    await until(() => a.liveMembers().length === 2 && b.liveMembers().length === 2 && c.liveMembers().length === 2)
    const gotA = record(a), gotB = record(b), gotC = record(c)
    for (let i = 0; i < 50; i++) {
      const msg: BusMessage = { kind: 'key', accountId: 'acct_x', keyHash: `h${i}` }
      await a.publish(msg)
      // applied everywhere before publish resolved
      expect(gotA.at(-1)).toEqual(msg)
      expect(gotB.at(-1)).toEqual(msg)
      expect(gotC.at(-1)).toEqual(msg)
    }
    expect(a.state()).toBe('ok')
    // device broadcasts reach the others too (no ack needed)
    await b.publish({ kind: 'device', accountId: 'acct_x', keyHash: 'h', fingerprint: 'f', activationId: 'act_1' })
    await until(() => gotA.at(-1)?.kind === 'device' && gotC.at(-1)?.kind === 'device')
    // a node that leaves says goodbye and is no longer waited for
    await c.close()
    await until(() => !a.liveMembers().includes(c.nodeId))
    expect(a.liveMembers()).toEqual([b.nodeId])
    await a.close()
    await b.close()
  })

  test('a member that never acks delays a publish by the bounded wait only', async () => {
    const a = await start(natsUrl!, { ackTimeoutMs: 300 })
    // a fake member: heartbeats but never acks
    const { connect } = await import('nats')
    const nc = await connect({ servers: natsUrl })
    const [{ id }] = await db.sql<{ id: string }[]>`select id from cluster_identity`
    const hb = setInterval(() => nc.publish(`keyward.${id}.hb`, new TextEncoder().encode(JSON.stringify({ node: 'ghost' }))), 100)
    await until(() => a.liveMembers().includes('ghost'))
    const t0 = performance.now()
    await a.publish({ kind: 'api_key', tokenHash: 'x' })
    console.log(`publish with a silent member returned after ${(performance.now() - t0).toFixed(0)} ms (bound 300 ms)`)
    clearInterval(hb)
    await nc.close()
    await a.close()
  })

  test('a node whose connection is cut goes down, then resyncs on reconnect', async () => {
    const a = await start()
    const b = await start(proxy.url('nats'))
    await until(() => a.liveMembers().includes(b.nodeId))
    const gotB = record(b)
    proxy.cut()
    await until(() => b.state() === 'down')
    await a.publish({ kind: 'key', accountId: 'acct_x', keyHash: 'missed' }) // b is gone: bounded wait
    expect(gotB.some((m) => m.kind === 'key')).toBe(false)
    proxy.restore()
    await until(() => b.state() === 'ok', 10_000)
    expect(gotB.some((m) => m.kind === 'resync')).toBe(true)
    await a.close()
    await b.close()
  })

  test('receivers notice a change they never received (the writer was cut) and resync', async () => {
    const writer = await start(proxy.url('nats'))
    const reader = await start()
    await until(() => reader.liveMembers().includes(writer.nodeId))
    const got = record(reader)
    proxy.cut()
    await until(() => writer.state() === 'down')
    const t0 = Date.now()
    await writer.publish({ kind: 'key', accountId: 'acct_x', keyHash: 'lost' }) // numbered, never sent
    expect(reader.state()).toBe('ok')
    await until(() => got.some((m) => m.kind === 'resync'))
    console.log(`reader resynced ${Date.now() - t0} ms after a change it never received`)
    expect(got.some((m) => m.kind === 'key')).toBe(false)
    proxy.restore()
    await writer.close()
    await reader.close()
  })
})

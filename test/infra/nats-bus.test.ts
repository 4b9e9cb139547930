// NatsBus against the real NATS server: acks from every live member, membership from Postgres (the one
// list writers wait for), resync after a cut connection, and the change sequence catching a message
// that never arrived.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import type { BusMessage } from '../../src/infra/bus'
import { beat, liveNodes } from '../../src/infra/cluster-nodes'
import type { Db } from '../../src/infra/db'
import { createLogger } from '../../src/infra/log'
import { migrate } from '../../src/infra/migrate'
import { registry } from '../../src/infra/metrics'
import { NatsBus } from '../../src/infra/nats-bus'
import { freshDatabase, type TestDb } from '../support/harness'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { waitUntil } from '../support/wait'
import { requireEnvironment } from '../support/environment'

const natsUrl = process.env.NATS_URL
const cluster = await requireEnvironment('infra/nats-bus', ['postgres', 'nats'])

const log = createLogger('silent')
const until = (cond: () => boolean, ms = 5000) => waitUntil(cond, ms)

describe.if(cluster)('NatsBus on real NATS', () => {
  let tdb: TestDb
  let db: Db
  let proxy: TcpProxy
  const buses: NatsBus[] = []
  const start = async (url = natsUrl!, extra: { ackTimeoutMs?: number; trustWindowMs?: number } = {}) => {
    const bus = await NatsBus.start({ url, sql: db.sql, log, seqPollMs: 200, ackTimeoutMs: 500, ...extra })
    buses.push(bus)
    return bus
  }
  /** The other nodes `bus`'s writes wait for: those whose Postgres row was renewed lately. */
  const members = (bus: NatsBus) => liveNodes(db.sql, bus.nodeId, 5000).then((ids) => ids.sort())
  const ackTimeouts = async () =>
    (await registry.getSingleMetric('keyward_invalidations_total')!.get()).values.find((v) => v.labels.direction === 'ack_timeout')?.value ?? 0
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
  // Each test starts with no member left by the one before (a bus a test did not close, or a goodbye
  // that did not reach Postgres in time on a busy machine): the membership is what these tests count.
  beforeEach(async () => {
    for (const b of buses.splice(0)) await b.close()
    await db.sql`delete from cluster_nodes`
  })
  afterAll(async () => {
    for (const b of buses) await b.close()
    proxy?.close()
    await db?.close()
    await tdb?.drop()
  })

  test('publish returns after every live member applied the message', async () => {
    const [a, b, c] = [await start(), await start(), await start()]
    expect(await members(a)).toEqual([b.nodeId, c.nodeId].sort()) // registered before start returned
    expect(await members(c)).toEqual([a.nodeId, b.nodeId].sort())
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
    // each change is sent twice (early, then with its number) and applied once
    for (const got of [gotA, gotB, gotC]) expect(got.filter((m) => m.kind === 'key').length).toBe(50)
    // device broadcasts reach the others too (no ack needed)
    await b.publish({ kind: 'device', accountId: 'acct_x', keyHash: 'h', fingerprint: 'f', activationId: 'act_1' })
    await until(() => gotA.at(-1)?.kind === 'device' && gotC.at(-1)?.kind === 'device')
    // a node that leaves says goodbye and is no longer waited for
    await c.close()
    expect(await members(a)).toEqual([b.nodeId])
    await a.publish({ kind: 'key', accountId: 'acct_x', keyHash: 'after-c' })
    expect(gotB.at(-1)).toEqual({ kind: 'key', accountId: 'acct_x', keyHash: 'after-c' })
    await a.close()
    await b.close()
  })

  test('a member that never acks nor reports the change delays a publish by its trust window only', async () => {
    const a = await start(natsUrl!, { trustWindowMs: 300 })
    // a fake member: registered in Postgres (so writers wait for it), silent on NATS
    await beat(db.sql, 'ghost', 0)
    expect(await members(a)).toContain('ghost')
    const before = await ackTimeouts()
    const t0 = performance.now()
    await a.publish({ kind: 'api_key', tokenHash: 'x' })
    console.log(`publish with a silent member returned after ${(performance.now() - t0).toFixed(0)} ms (trust window 300 ms)`)
    // waited out, not acked (the counter is the process's: another file's bus may add its own meanwhile)
    expect(await ackTimeouts()).toBeGreaterThanOrEqual(before + 1)
    await db.sql`delete from cluster_nodes where id = 'ghost'`
    await a.close()
  })

  test('a node whose connection is cut goes down, then resyncs on reconnect', async () => {
    const a = await start()
    const b = await start(proxy.url('nats'))
    expect(await members(a)).toContain(b.nodeId)
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

  test('a writer waits out a member it cannot hear: when publish returns, the member dropped the change or stopped trusting memory', async () => {
    const writer = await start(natsUrl!, { trustWindowMs: 800 })
    const member = await start(proxy.url('nats'), { trustWindowMs: 800 })
    expect(await members(writer)).toContain(member.nodeId)
    await until(() => member.trusted(Date.now()))
    const got = record(member)
    for (let i = 0; i < 3; i++) {
      proxy.pause() // silent: the member's connection stays open and carries nothing
      await writer.publish({ kind: 'key', accountId: 'acct_x', keyHash: `unheard${i}` })
      const dropped = got.some((m) => m.kind === 'resync' || (m.kind === 'key' && m.keyHash === `unheard${i}`))
      const trusting = member.trusted(Date.now())
      console.log(`publish past a paused member: member ${dropped ? 'resynced' : 'did not resync'}, ${trusting ? 'trusts' : 'distrusts'} its memory`)
      expect(dropped || !trusting).toBe(true)
      proxy.resume()
      await until(() => member.trusted(Date.now()), 10_000)
      got.length = 0
    }
    await writer.close()
    await member.close()
  })

  test('a node that cannot renew its lease in Postgres stops trusting its memory on its own', async () => {
    const tdb2 = await freshDatabase()
    const db2 = await tdb2.open()
    await migrate(db2.sql)
    const u = new URL(process.env.DATABASE_URL!)
    const pgProxy = await startTcpProxy(u.hostname, Number(u.port || 5432))
    const viaProxy = new URL(tdb2.url!)
    viaProxy.host = `127.0.0.1:${pgProxy.port}`
    const { connectPostgres } = await import('../../src/infra/db')
    const cut = await connectPostgres(viaProxy.toString())
    const bus = await NatsBus.start({ url: natsUrl!, sql: cut.sql, log, seqPollMs: 100, trustWindowMs: 600 })
    try {
      await until(() => bus.trusted(Date.now()))
      pgProxy.pause()
      await until(() => !bus.trusted(Date.now()), 5000)
      expect(bus.state()).toBe('ok') // NATS itself is fine: the lease, not the connection, decided
      pgProxy.resume()
      await until(() => bus.trusted(Date.now()), 10_000)
    } finally {
      await bus.close()
      pgProxy.close()
      await cut.close().catch(() => {})
      await db2.close()
      await tdb2.drop()
    }
  }, 30_000)

  test('a change sequence that went back (Postgres lost the end of its log) makes a node drop its memory', async () => {
    const a = await start()
    const b = await start()
    for (let i = 0; i < 3; i++) await a.publish({ kind: 'key', accountId: 'acct_x', keyHash: `before-rewind${i}` })
    const got = record(b)
    const [{ v }] = await db.sql<{ v: string }[]>`select last_value::text as v from cluster_changes`
    await db.sql`select setval('cluster_changes', ${Number(v) - 2})` // numbers b has received will be handed out again
    await until(() => got.some((m) => m.kind === 'resync'))
    // from then on the reused numbers count again: b trusts its memory, and a's writes reach it
    await until(() => b.trusted(Date.now()))
    await a.publish({ kind: 'key', accountId: 'acct_x', keyHash: 'after-rewind' })
    expect(got.at(-1)).toEqual({ kind: 'key', accountId: 'acct_x', keyHash: 'after-rewind' })
    await a.close()
    await b.close()
  })

  test('receivers notice a change they never received (the writer was cut) and resync', async () => {
    const writer = await start(proxy.url('nats'))
    const reader = await start()
    expect(await members(reader)).toContain(writer.nodeId)
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
  test('barrier: every member runs its handlers before it resolves true; one that fails or cannot hear makes it false', async () => {
    const [a, b, c] = [await start(), await start(), await start(proxy.url('nats'))]
    expect(await members(a)).toEqual([b.nodeId, c.nodeId].sort())
    await until(() => c.state() === 'ok')
    const ran: string[] = []
    a.onBarrier(async () => void ran.push('a'))
    b.onBarrier(async () => {
      await Bun.sleep(150) // a slow write: the barrier waits for it
      ran.push('b')
    })
    let cFails = false
    c.onBarrier(async () => {
      if (cFails) throw new Error('Postgres down')
      ran.push('c')
    })
    expect(await a.barrier()).toBe(true)
    expect(ran.sort()).toEqual(['a', 'b', 'c'])

    // a member whose handlers fail does not confirm
    ran.length = 0
    cFails = true
    const t0 = performance.now()
    expect(await a.barrier(400)).toBe(false)
    expect(performance.now() - t0).toBeGreaterThanOrEqual(350)
    expect(ran.sort()).toEqual(['a', 'b'])

    // a member that is live in Postgres but hears nothing on NATS does not confirm either
    cFails = false
    ran.length = 0
    proxy.pause()
    expect(await a.barrier(400)).toBe(false)
    expect(ran.sort()).toEqual(['a', 'b'])
    proxy.resume()
    await until(() => c.state() === 'ok')

    // a member that left is not waited for; this node's own handler failing rejects
    await c.close()
    expect(await a.barrier()).toBe(true)
    a.onBarrier(async () => {
      throw new Error('local write failed')
    })
    expect(await a.barrier().catch((e: Error) => e.message)).toBe('local write failed')
    await a.close()
    await b.close()
  })
})

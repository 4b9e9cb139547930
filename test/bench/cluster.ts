// `bun run bench:cluster`: cluster-mode figures, against the local Postgres, NATS and Redis.
//  1. Invalidation propagation: in-process NatsBus x3 (publish → every member acked; beside it the same
//     fan-out over bare NATS, its floor on this machine), and end to end
//     over HTTP with three node processes (revoke on A, which returns once B and C dropped the key),
//     against a single node without NATS as the baseline.
//  2. Validate throughput with WORKERS=2 relative to WORKERS=1, same machine, same run (wrk when
//     installed, else a Bun client).
// A program, not a test: it prints figures and ratios and asserts nothing about time.
import { benchAccount, requireServices } from './fixture'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { connect, type NatsConnection } from 'nats'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger } from '../../src/infra/log'
import { migrate } from '../../src/infra/migrate'
import { NatsBus } from '../../src/infra/nats-bus'
import { announce } from '../../src/infra/cluster-nodes'
import { ADMIN_TOKEN, client, freshDatabase, newKey, newProduct } from '../support/harness'
import { fingerprint, startNodeProcess, type NodeProcess } from '../support/cluster'
import { median } from './stats'

requireServices('bun run bench:cluster', ['DATABASE_URL', 'NATS_URL', 'REDIS_URL'])

const ROUNDS = Number(process.argv[2] ?? 300)
const SECONDS = Number(process.argv[3] ?? 3)
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!
const fmt = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(2)} ms, p99 ${pct(xs, 99).toFixed(2)} ms, max ${Math.max(...xs).toFixed(2)} ms`

const db = await freshDatabase()
const cleanup: (() => Promise<unknown>)[] = [() => db.drop()]
try {
  // 1a. The bus alone: three buses in this process on the real NATS server.
  {
    const conn = await db.open()
    await migrate(conn.sql)
    const log = createLogger('silent')
    const buses = await Promise.all([0, 1, 2].map(() => NatsBus.start({ url: process.env.NATS_URL!, sql: conn.sql, log })))
    await Bun.sleep(700)
    // Interleaved with what bounds it from below: one Postgres round trip, taking a number alone (a
    // publish sends its early copy while the number is taken: it costs about the slower of the two),
    // and the same fan-out with no Keyward code at all: bare NATS connections in this process, one
    // message to two members, each answering on its own subject, until both answers are in.
    const bare = await bareFanOut(process.env.NATS_URL!)
    const times: number[] = [], roundTrips: number[] = [], numbers: number[] = [], bareTimes: number[] = []
    for (let i = 0; i < ROUNDS; i++) {
      let t0 = performance.now()
      await bare.round(i)
      bareTimes.push(performance.now() - t0)
      t0 = performance.now()
      await conn.sql`select 1`
      roundTrips.push(performance.now() - t0)
      t0 = performance.now()
      await announce(conn.sql, 'bench-probe', 1000)
      numbers.push(performance.now() - t0)
      t0 = performance.now()
      await buses[i % 3]!.publish({ kind: 'key', accountId: 'acct_bench', keyHash: `h${i}` })
      times.push(performance.now() - t0)
    }
    console.log(`Postgres round trip (select 1), for reference: ${fmt(roundTrips)}`)
    console.log(`taking a change number alone (cluster_announce), for reference: ${fmt(numbers)}`)
    console.log(`bare NATS, one message → both members' answers (no Keyward code), for reference: ${fmt(bareTimes)}`)
    console.log(`bus publish → acked by both other nodes (${ROUNDS} rounds, includes taking the change number): ${fmt(times)}`)
    console.log(`publish p99 / bare NATS fan-out p99: ${(pct(times, 99) / pct(bareTimes, 99)).toFixed(2)}x`)
    await bare.close()
    for (const b of buses) await b.close()
    await conn.close()
  }

  // 1b. End to end: three node processes.
  const nodes: NodeProcess[] = []
  cleanup.unshift(() => Promise.all(nodes.map((n) => n.stop())))
  nodes.push(await startNodeProcess(db.url!))
  nodes.push(...(await Promise.all([1, 2].map(() => startNodeProcess(db.url!)))))
  await Bun.sleep(700)
  const admin = client(nodes[0]!.url)
  const { token } = await benchAccount(admin)
  const product = await newProduct(admin, token)
  const n = Math.min(ROUNDS, 200)
  const revokeRound = async (writer: NodeProcess, readers: NodeProcess[]) => {
    const times: number[] = []
    let stale = 0
    for (let i = 0; i < n; i++) {
      const key = await newKey(writer.call, token, product.id)
      const body = { key: key.key_value, device_fingerprint: fingerprint(1, 'b') }
      for (const node of [writer, ...readers]) await node.call('POST', '/v1/validate', { token, body })
      const t0 = performance.now()
      await writer.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })
      times.push(performance.now() - t0)
      for (const r of readers) if ((await r.call('POST', '/v1/validate', { token, body })).body.reason !== 'revoked') stale++
    }
    return { times, stale }
  }
  const clustered = await revokeRound(nodes[0]!, [nodes[1]!, nodes[2]!])
  console.log(`revoke on A, 3 nodes (commit + invalidation acked by B and C), ${n} keys: ${fmt(clustered.times)}; ` +
    `stale answers on B/C right after: ${clustered.stale}`)
  await Promise.all(nodes.map((node) => node.stop()))
  nodes.length = 0
  // Baseline in the same run: one node with the in-process bus (nobody to wait for).
  const single = await startNodeProcess(db.url!, { env: { NATS_URL: '' } })
  nodes.push(single)
  const alone = await revokeRound(single, [])
  console.log(`revoke on a single node without NATS (baseline), ${n} keys: ${fmt(alone.times)}; ` +
    `cluster cost at p50: ${(pct(clustered.times, 50) - pct(alone.times, 50)).toFixed(2)} ms`)
  await single.stop()
  nodes.length = 0

  // 2. Throughput: WORKERS=1 then WORKERS=2 on the same database, port and key.
  const key = await (async () => {
    const node = await startNodeProcess(db.url!)
    const k = await newKey(node.call, token, product.id)
    await node.call('POST', '/v1/validate', { token, body: { key: k.key_value, device_fingerprint: fingerprint(1, 'c') } })
    await node.stop()
    return k
  })()
  const body = JSON.stringify({ key: key.key_value, device_fingerprint: fingerprint(1, 'c') })
  const hasWrk = Bun.spawnSync(['sh', '-c', 'command -v wrk']).exitCode === 0
  // Both set-ups run side by side (idle one costs nothing) and are measured in alternation, so a
  // burst of load from elsewhere on the machine hits both alike; the median of each is reported.
  const servers: Record<number, NodeProcess> = {}
  for (const workers of [1, 2]) {
    servers[workers] = await startNodeProcess(db.url!, { env: { WORKERS: String(workers), LOG_LEVEL: 'error' } })
    nodes.push(servers[workers]!)
  }
  await Bun.sleep(1500) // every worker listening
  const runs: Record<number, number[]> = { 1: [], 2: [] }
  for (let round = 0; round < 3; round++) {
    for (const workers of round % 2 ? [2, 1] : [1, 2]) {
      const url = `${servers[workers]!.url}/v1/validate`
      runs[workers]!.push(hasWrk ? await wrk(url, token, body, SECONDS) : await bunLoad(url, token, body, SECONDS))
    }
  }
  for (const workers of [1, 2]) {
    console.log(`validate, WORKERS=${workers}: median ${median(runs[workers]!).toFixed(0)} req/s ` +
      `(runs: ${runs[workers]!.map((r) => r.toFixed(0)).join(', ')}; ${hasWrk ? 'wrk -t2 -c50' : 'Bun client, 50 in flight'}, ${SECONDS} s each)`)
  }
  console.log(`WORKERS=2 / WORKERS=1 throughput: ${(median(runs[2]!) / median(runs[1]!)).toFixed(2)}x ` +
    `(2 cores shared with the load generator, Postgres, NATS and Redis)`)
} finally {
  for (const f of cleanup) await f().catch(() => {})
}

/** One message to two members over bare NATS connections, each answering on its own subject: the fan-out's floor. */
async function bareFanOut(url: string) {
  const members: NatsConnection[] = await Promise.all([0, 1].map(() => connect({ servers: url })))
  for (const [n, nc] of members.entries()) {
    const sub = nc.subscribe('kw-bench.fanout')
    void (async () => {
      for await (const m of sub) nc.publish(`kw-bench.answer.${n}`, m.data)
    })()
  }
  const writer = await connect({ servers: url })
  const waiting: { left: number; done: () => void } = { left: 0, done: () => {} }
  const answers = writer.subscribe('kw-bench.answer.*')
  void (async () => {
    for await (const _ of answers) if (waiting.left > 0 && --waiting.left === 0) waiting.done()
  })()
  await Promise.all([writer, ...members].map((nc) => nc.flush()))
  return {
    round: (i: number) =>
      new Promise<void>((done) => {
        waiting.left = 2
        waiting.done = done
        writer.publish('kw-bench.fanout', String(i))
      }),
    close: () => Promise.all([writer, ...members].map((nc) => nc.close())),
  }
}

async function wrk(url: string, token: string, body: string, seconds: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'kw-bench-'))
  const script = join(dir, 'validate.lua')
  writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\nwrk.headers["Authorization"] = "Bearer ${token}"\n`)
  const out = Bun.spawnSync(['wrk', '-t2', '-c50', `-d${seconds}s`, '-s', script, url]).stdout.toString()
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)
  if (non2xx) console.log(`  (warning: ${non2xx[1]} non-2xx answers)`)
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0)
}

async function bunLoad(url: string, token: string, body: string, seconds: number): Promise<number> {
  const end = performance.now() + seconds * 1000
  let done = 0
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (performance.now() < end) {
        await (await fetch(url, { method: 'POST', headers, body })).arrayBuffer()
        done++
      }
    }),
  )
  return done / seconds
}

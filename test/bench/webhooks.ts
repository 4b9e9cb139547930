// `bun run bench:webhooks`: webhook delivery throughput and event-to-delivery latency, against a
// baseline measured in the same run (plain fetch POSTs of the same size to the same receiver). Prints
// figures; asserts nothing (benchmarks are programs, not tests).
//
//   bun run bench:webhooks                  embedded Postgres (PGlite) unless DATABASE_URL is set
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun run bench:webhooks
//   BENCH_EVENTS=20000 BENCH_ROUNDS=3 BENCH_LATENCY_SAMPLES=200 bun run bench:webhooks
//
// The node runs in this process (so the burst can be written in one transaction); the receiver runs in
// its own process and timestamps each arrival.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { loadConfig } from '../../src/config'
import { createLogger } from '../../src/infra/log'
import { afterCommit } from '../../src/infra/db'
import { emit, emitMany, SYSTEM } from '../../src/modules/events/outbox'
import { startNode } from '../../src/node'
import { HostAddresses, resolveTarget } from '../../src/modules/webhooks/ssrf'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20000)
const SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 200)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'

/** A request seen by the receiver: its webhook-id, when its handler ran, and the client port it came from (one per connection). */
type Arrival = { id: string; at: number; peer: number }
const now = () => performance.timeOrigin + performance.now()

/** CPU time (ms) used so far by these processes, from /proc (Linux); null elsewhere. */
function cpuMsOf(pids: number[]): number | null {
  try {
    let ticks = 0
    for (const pid of pids) {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
      ticks += Number(fields[11]) + Number(fields[12]) // utime, stime
    }
    return ticks * 10 // USER_HZ is 100 on Linux
  } catch {
    return null
  }
}

/** CPU time (ms) used so far by each thread of this process, by thread name (the JS thread is "bun"); null off Linux. */
function threadCpuMs(): Map<string, number> | null {
  try {
    const out = new Map<string, number>()
    for (const tid of readdirSync('/proc/self/task')) {
      const name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()
      const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ')
      out.set(name, (out.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) * 10)
    }
    return out
  } catch {
    return null
  }
}

/** Per delivery (µs), the JS thread, Bun's HTTP client thread and the rest, between two threadCpuMs readings. */
function threadSplit(a: Map<string, number> | null, b: Map<string, number> | null, n: number): string {
  if (!a || !b) return 'n/a'
  const d = (name: string) => (b.get(name) ?? 0) - (a.get(name) ?? 0)
  let rest = 0
  for (const name of b.keys()) if (name !== 'bun' && name !== 'HTTP Client') rest += d(name)
  const us = (ms: number) => ((ms * 1000) / n).toFixed(0)
  return `JS thread ${us(d('bun'))} + HTTP client thread ${us(d('HTTP Client'))} + others ${us(rest)} µs`
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]
const fmt = (ms: number) => `${ms.toFixed(2)} ms`
const fmtUs = (us: number | null) => (us === null ? 'n/a' : `${us.toFixed(0)} µs`)

async function startReceiver() {
  const proc = Bun.spawn(['bun', import.meta.path, 'receiver'], { stdout: 'pipe', stderr: 'inherit' })
  let text = ''
  for await (const chunk of proc.stdout) {
    text += new TextDecoder().decode(chunk)
    const m = /receiver (\d+)/.exec(text)
    if (m) return { proc, url: `http://127.0.0.1:${m[1]}` }
  }
  throw new Error('receiver did not start')
}

async function arrivals(url: string): Promise<Arrival[]> {
  return (await (await fetch(url)).json()) as Arrival[]
}

/** Polls the receiver (arrival times are its own, so the poll period only costs CPU, not precision). */
async function waitForArrivals(url: string, n: number, timeoutMs = 120_000, pollMs = 2): Promise<Arrival[]> {
  const all: Arrival[] = []
  const until = Date.now() + timeoutMs
  while (all.length < n) {
    if (Date.now() > until) throw new Error(`only ${all.length}/${n} deliveries arrived`)
    all.push(...(await arrivals(url)))
    if (all.length < n) await Bun.sleep(pollMs)
  }
  return all
}

async function main() {
  const base = process.env.DATABASE_URL
  let dbName: string | null = null
  let dbUrl: string | undefined
  if (base) {
    dbName = `keyward_bench_wh_${Date.now().toString(36)}`
    const admin = postgres(base, { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database ${dbName}`)
    await admin.end()
    const u = new URL(base)
    u.pathname = `/${dbName}`
    dbUrl = u.toString()
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'keyward-bench-wh-'))
  const config = loadConfig({
    ADMIN_TOKEN,
    SECRET_KEY: 'cd'.repeat(32),
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    DEMO_ACCOUNT: 'false',
    DATA_DIR: dataDir,
    DATABASE_URL: dbUrl,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  })
  const receiver = await startReceiver()
  const node = await startNode(config, { log: createLogger('silent') })
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(node.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as any }
  }
  try {
    const acct = await call('POST', '/admin/accounts', ADMIN_TOKEN, { name: 'Bench', plan: 'enterprise' })
    const token: string = acct.body.api_key.token
    const accountId: string = acct.body.account.id
    await call('POST', '/v1/webhooks', token, { url: `${receiver.url}/hook`, events: ['product.created', 'key.created'] })

    const sql = node.deps.sql
    // Baseline: the same receiver, plain fetch POSTs of a delivery-sized body, 32 in flight.
    const sample = JSON.stringify({ id: 'evt_x', type: 'key.created', timestamp: new Date().toISOString(), data: { pad: 'x'.repeat(400) } })
    async function baseline() {
      let sent = 0
      const t0 = now()
      const cpu0 = process.cpuUsage()
      const threads0 = threadCpuMs()
      const rx0 = cpuMsOf([receiver.proc.pid])
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (sent < EVENTS) {
            sent++
            const res = await fetch(`${receiver.url}/baseline`, { method: 'POST', body: sample, headers: { 'webhook-id': 'baseline' } })
            await res.arrayBuffer()
          }
        }),
      )
      const rps = EVENTS / ((now() - t0) / 1000)
      const cpu = process.cpuUsage(cpu0)
      const threads = threadSplit(threads0, threadCpuMs(), EVENTS)
      const rxUs = rx0 === null ? null : ((cpuMsOf([receiver.proc.pid])! - rx0) * 1000) / EVENTS
      return { rps, cpuUs: (cpu.user + cpu.system) / EVENTS, threads, rxUs, connections: new Set((await arrivals(receiver.url)).map((a) => a.peer)).size }
    }

    // Throughput: a burst of EVENTS events committed in one transaction, delivered as fast as possible.
    const product = { id: 'prod_bench', note: 'x'.repeat(400) }
    // The database's backends at a moment, with the CPU each has used (a backend that appears later started from 0).
    const backendsCpu = async () => {
      const pids = (await sql<{ pid: number }[]>`select pid from pg_stat_activity where datname = current_database()`).map((r) => r.pid)
      return new Map(pids.map((pid) => [pid, cpuMsOf([pid]) ?? 0]))
    }
    const pgCpuSince = async (before: Map<number, number>) => {
      let ms = 0
      for (const [pid, now] of await backendsCpu()) ms += now - (before.get(pid) ?? 0)
      return ms
    }
    async function burst() {
      const start = now()
      // CPU of the write itself (this process and Postgres), per event: the node's own deliveries are
      // handed to its worker at the commit, by the write, so part of delivering is paid here
      const writePg0 = cpuMsOf([process.pid]) === null ? null : await backendsCpu()
      const writeNode0 = process.cpuUsage()
      let commitSent = 0
      let committed = 0
      await sql.begin(async (tx) => {
        // the acknowledgement of COMMIT: this hook runs first, before the node's (which hand its own
        // deliveries to its worker) and so before `begin` returns
        afterCommit(tx, () => (committed = now()), () => {})
        for (let i = 0; i < EVENTS; i += 500) {
          const n = Math.min(500, EVENTS - i)
          await emitMany(tx, Array.from({ length: n }, (_, j) => ({ accountId, type: 'key.created' as const, data: { ...product, i: i + j }, actor: SYSTEM })))
        }
        commitSent = now()
      })
      if (committed === 0) committed = now() // (not a tracked transaction: no hook ran)
      const writeNodeCpu = process.cpuUsage(writeNode0)
      const writePgUs = writePg0 === null ? null : ((await pgCpuSince(writePg0)) * 1000) / EVENTS
      const pg0 = cpuMsOf([process.pid]) === null ? null : await backendsCpu()
      const rx0 = cpuMsOf([receiver.proc.pid])
      const node0 = process.cpuUsage()
      const threads0 = threadCpuMs()
      const got = await waitForArrivals(receiver.url, EVENTS, 120_000, 50)
      const last = Math.max(...got.map((a) => a.at))
      while ((await sql`select 1 from webhook_deliveries where status = 'pending' limit 1`).length) await Bun.sleep(5)
      const nodeCpu = process.cpuUsage(node0)
      const threads = threadSplit(threads0, threadCpuMs(), EVENTS)
      return {
        rps: EVENTS / ((last - committed) / 1000),
        writeMs: committed - start,
        writeNodeUs: (writeNodeCpu.user + writeNodeCpu.system) / EVENTS,
        writePgUs,
        firstMs: Math.min(...got.map((a) => a.at)) - committed,
        connections: new Set(got.map((a) => a.peer)).size,
        nodeUs: (nodeCpu.user + nodeCpu.system) / EVENTS,
        threads,
        pgUs: pg0 === null ? null : ((await pgCpuSince(pg0)) * 1000) / EVENTS,
        rxUs: rx0 === null ? null : ((cpuMsOf([receiver.proc.pid])! - rx0) * 1000) / EVENTS,
      }
    }

    // Rounds of (baseline, burst), interleaved: the machine's load drifts, a ratio is only fair within a round.
    const rounds: { base: Awaited<ReturnType<typeof baseline>>; burst: Awaited<ReturnType<typeof burst>> }[] = []
    for (let r = 0; r < ROUNDS; r++) rounds.push({ base: await baseline(), burst: await burst() })
    const [{ attempts, dup }] = await sql<{ attempts: number; dup: number }[]>`select count(*)::int as attempts,
      (count(*) - count(distinct event_id))::int as dup from webhook_attempt_log where event_type = 'key.created'`

    // Latency on an idle system, one event at a time, each waited for: (1) a product created through the
    // API, from the call; (2) an event committed by this process, from the moment its COMMIT is sent (and
    // from the moment it is acknowledged) to the moment the receiver's handler runs (its first byte, give
    // or take the request parsing).
    const fromCall: number[] = []
    const fromCommit: number[] = []
    const fromAck: number[] = []
    for (let i = 0; i < SAMPLES; i++) {
      const start = now()
      await call('POST', '/v1/products', token, { name: `p${i}`, slug: `lat-${i}` })
      const [arrival] = await waitForArrivals(receiver.url, 1, 10_000)
      fromCall.push(arrival.at - start)
      await Bun.sleep(5)
      let commitSent = 0
      let committed = 0
      await sql.begin(async (tx) => {
        afterCommit(tx, () => (committed = now()), () => {}) // first of the hooks, as above
        await emit(tx, accountId, 'product.created', { id: `prod_lat${i}`, i }, SYSTEM)
        commitSent = now() // the callback has returned: postgres.js sends COMMIT next
      })
      if (committed === 0) committed = now()
      const [delivered] = await waitForArrivals(receiver.url, 1, 10_000)
      fromCommit.push(delivered.at - commitSent)
      fromAck.push(delivered.at - committed)
      await Bun.sleep(5)
    }
    fromCall.sort((a, b) => a - b)
    fromCommit.sort((a, b) => a - b)
    fromAck.sort((a, b) => a - b)

    // The target check each attempt makes with the production setting (WEBHOOK_ALLOW_PRIVATE_URLS=false):
    // the host name is looked up (here `localhost`, from /etc/hosts: the cheapest lookup there is; its
    // loopback answer is then refused, which costs the same as accepting a public one). A lookup every
    // time (answers kept 0 ms) against the reused answer (the default), CPU of this process per check.
    const checkCpu = async (hosts: HostAddresses) => {
      const n = 5000
      for (let i = 0; i < 500; i++) await resolveTarget('http://localhost:9/hook', false, hosts) // warm
      const c0 = process.cpuUsage()
      for (let i = 0; i < n; i++) await resolveTarget('http://localhost:9/hook', false, hosts)
      const c = process.cpuUsage(c0)
      return (c.user + c.system) / n
    }
    const checks = { everyTime: [] as number[], reused: [] as number[] }
    for (let r = 0; r < 3; r++) {
      checks.everyTime.push(await checkCpu(new HostAddresses(undefined, 0)))
      checks.reused.push(await checkCpu(new HostAddresses()))
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

    const ratios = rounds.map((r) => r.burst.rps / r.base.rps)
    console.log(`\nKeyward webhook delivery (${config.embedded ? 'embedded PGlite' : 'Postgres'}, receiver in its own process, ${navigator.hardwareConcurrency} cores)`)
    console.log(`  ${ROUNDS} rounds of: plain fetch POSTs to the receiver (32 in flight), then a burst of ${EVENTS} events committed in one transaction`)
    for (const [i, { base, burst: b }] of rounds.entries()) {
      console.log(`  round ${i + 1}: baseline ${base.rps.toFixed(0)} req/s (${base.connections} connections)   delivered ${b.rps.toFixed(0)} deliveries/s (${b.connections} connections)   ${ratios[i].toFixed(2)} × baseline`)
      console.log(`           burst written in ${fmt(b.writeMs)} (CPU per event: this process ${fmtUs(b.writeNodeUs)}, Postgres ${fmtUs(b.writePgUs)}), first delivery ${fmt(b.firstMs)} after commit`)
      console.log(`           CPU per baseline request: this process ${fmtUs(base.cpuUs)} (${base.threads}), receiver ${fmtUs(base.rxUs)}`)
      console.log(`           CPU per delivery: this process (node + bench) ${fmtUs(b.nodeUs)} (${b.threads}), its Postgres backends ${fmtUs(b.pgUs)}, receiver ${fmtUs(b.rxUs)}`)
    }
    console.log(`  deliveries vs baseline, median of the rounds: ${[...ratios].sort((a, b) => a - b)[Math.floor(ROUNDS / 2)].toFixed(2)} ×; attempts ${attempts}, duplicates ${dup}`)
    console.log(`  event-to-delivery latency, idle, ${SAMPLES} events one at a time, to the moment the receiver's handler runs:`)
    console.log(`    commit to first byte at the receiver (from the COMMIT's acknowledgement):  p50 ${fmt(pct(fromAck, 50))}   p99 ${fmt(pct(fromAck, 99))}   max ${fmt(fromAck[fromAck.length - 1])}`)
    console.log(`      (the writing node hands its own deliveries to its worker as the commit settles: the request is under way at once)`)
    console.log(`    from the moment COMMIT is sent (adds the event's own WAL flush):           p50 ${fmt(pct(fromCommit, 50))}   p99 ${fmt(pct(fromCommit, 99))}   max ${fmt(fromCommit[fromCommit.length - 1])}`)
    console.log(`    from the API call (POST /v1/products):                                     p50 ${fmt(pct(fromCall, 50))}   p99 ${fmt(pct(fromCall, 99))}   max ${fmt(fromCall[fromCall.length - 1])}`)
    console.log(`  target check per attempt with WEBHOOK_ALLOW_PRIVATE_URLS=false (host name from /etc/hosts), CPU, median of 3:`)
    console.log(`    looked up every time ${med(checks.everyTime).toFixed(1)} µs   answer reused ${med(checks.reused).toFixed(1)} µs   ${(med(checks.reused) / med(checks.everyTime)).toFixed(2)} ×`)
    console.log(`  load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`)
  } finally {
    await node.stop()
    receiver.proc.kill()
    rmSync(dataDir, { recursive: true, force: true })
    if (base && dbName) {
      const admin = postgres(base, { max: 1, onnotice: () => {} })
      await admin.unsafe(`drop database if exists ${dbName} with (force)`)
      await admin.end()
    }
  }
}

async function runReceiver() {
  let arrivals: Arrival[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const at = now()
      if (req.method === 'GET') {
        const out = arrivals
        arrivals = []
        return Response.json(out)
      }
      const peer = server.requestIP(req)?.port ?? 0
      await req.arrayBuffer()
      arrivals.push({ id: req.headers.get('webhook-id') ?? '', at, peer })
      return new Response('ok')
    },
  })
  console.log(`receiver ${server.port}`)
}

if (process.argv[2] === 'receiver') await runReceiver()
else await main()

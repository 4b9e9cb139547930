// `bun run bench:webhooks`: webhook delivery throughput and event-to-delivery latency, against a
// baseline measured in the same run (plain fetch POSTs of the same size to the same receiver). Prints
// figures; asserts nothing (benchmarks are programs, not tests).
//
//   bun run bench:webhooks                  embedded Postgres (PGlite) unless DATABASE_URL is set
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun run bench:webhooks
//   BENCH_EVENTS=2000 BENCH_LATENCY_SAMPLES=200 bun run bench:webhooks
//
// The node runs in this process (so the burst can be written in one transaction); the receiver runs in
// its own process and timestamps each arrival.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { loadConfig } from '../../src/config'
import { createLogger } from '../../src/infra/log'
import { emit, SYSTEM } from '../../src/modules/events/outbox'
import { startNode } from '../../src/node'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000)
const SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 200)
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'

type Arrival = { id: string; at: number }
const now = () => performance.timeOrigin + performance.now()

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]
const fmt = (ms: number) => `${ms.toFixed(1)} ms`

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

async function waitForArrivals(url: string, n: number, timeoutMs = 120_000): Promise<Arrival[]> {
  const all: Arrival[] = []
  const until = Date.now() + timeoutMs
  while (all.length < n) {
    if (Date.now() > until) throw new Error(`only ${all.length}/${n} deliveries arrived`)
    all.push(...(await arrivals(url)))
    if (all.length < n) await Bun.sleep(2)
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

    // Baseline: the same receiver, plain fetch POSTs of a delivery-sized body, 32 in flight.
    const sample = JSON.stringify({ id: 'evt_x', type: 'key.created', timestamp: new Date().toISOString(), data: { pad: 'x'.repeat(400) } })
    let sent = 0
    const t0 = now()
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (sent < EVENTS) {
          sent++
          const res = await fetch(`${receiver.url}/baseline`, { method: 'POST', body: sample, headers: { 'webhook-id': 'baseline' } })
          await res.arrayBuffer()
        }
      }),
    )
    const baselineRps = EVENTS / ((now() - t0) / 1000)
    await arrivals(receiver.url)

    // Latency on an idle system: one event at a time (a product created through the API), each waited for.
    const fromCall: number[] = []
    const fromCommit: number[] = []
    for (let i = 0; i < SAMPLES; i++) {
      const start = now()
      const res = await call('POST', '/v1/products', token, { name: `p${i}`, slug: `lat-${i}` })
      const [arrival] = await waitForArrivals(receiver.url, 1, 10_000)
      fromCall.push(arrival.at - start)
      fromCommit.push(arrival.at - Date.parse(res.body.created_at))
    }
    fromCall.sort((a, b) => a - b)
    fromCommit.sort((a, b) => a - b)

    // Throughput: a burst of EVENTS events committed in one transaction, delivered as fast as possible.
    const sql = node.deps.sql
    const product = { id: 'prod_bench', note: 'x'.repeat(400) }
    const burstStart = now()
    await sql.begin(async (tx) => {
      for (let i = 0; i < EVENTS; i++) await emit(tx, accountId, 'key.created', { ...product, i }, SYSTEM)
    })
    const committed = now()
    const burst = await waitForArrivals(receiver.url, EVENTS)
    const last = Math.max(...burst.map((a) => a.at))
    const first = Math.min(...burst.map((a) => a.at))
    const deliveryRps = EVENTS / ((last - committed) / 1000)
    while ((await sql`select 1 from webhook_deliveries where status = 'pending' limit 1`).length) await Bun.sleep(5)
    const [{ attempts, dup }] = await sql<{ attempts: number; dup: number }[]>`select count(*)::int as attempts,
      (count(*) - count(distinct event_id))::int as dup from webhook_attempts where event_type = 'key.created'`

    console.log(`\nKeyward webhook delivery (${config.embedded ? 'embedded PGlite' : 'Postgres'}, receiver in its own process, ${navigator.hardwareConcurrency} cores)`)
    console.log(`  baseline: plain fetch POSTs to the receiver, 32 in flight     ${baselineRps.toFixed(0)} req/s`)
    console.log(`  burst of ${EVENTS} events (one transaction) → delivered      ${deliveryRps.toFixed(0)} deliveries/s  (${(deliveryRps / baselineRps).toFixed(2)} × baseline)`)
    console.log(`    writing the burst took ${fmt(committed - burstStart)}; first delivery ${fmt(first - committed)} after commit; attempts ${attempts}, duplicates ${dup}`)
    console.log(`  event-to-delivery latency, idle, ${SAMPLES} events one at a time:`)
    console.log(`    from the API call:          p50 ${fmt(pct(fromCall, 50))}   p99 ${fmt(pct(fromCall, 99))}   max ${fmt(fromCall[fromCall.length - 1])}`)
    console.log(`    from the event's timestamp: p50 ${fmt(pct(fromCommit, 50))}   p99 ${fmt(pct(fromCommit, 99))}   (event timestamps have 1 ms resolution)`)
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
      await req.arrayBuffer()
      arrivals.push({ id: req.headers.get('webhook-id') ?? '', at })
      return new Response('ok')
    },
  })
  console.log(`receiver ${server.port}`)
}

if (process.argv[2] === 'receiver') await runReceiver()
else await main()

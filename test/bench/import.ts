// `bun run bench:import`: 100,000 rows imported in 10 requests on one node while validate keeps
// serving (issue: "in < 30 s"). Against the local Postgres and NATS:
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres NATS_URL=nats://127.0.0.1:4222 bun run bench:import
//   BENCH_IMPORT_ROWS=100000 BENCH_IMPORT_REQUESTS=10 BENCH_IMPORT_PARALLEL=2 BENCH_IMPORT_RATE=1000 ...
//
// Rows are NDJSON, as a migration file would be: a third in Keyward's format, the rest other vendors'
// values, every tenth with a device, all with an external_id and metadata. The requests are sent
// BENCH_IMPORT_PARALLEL at a time (1: one after another). Validate runs over 500 warm keys at a
// steady BENCH_IMPORT_RATE per second (16 clients; 0: as fast as they can, which leaves the import
// only what the closed loop does not take), first alone for a few seconds (the baseline), then during
// the import; the figures are the import's time, validate's rate and p99 latency during it against
// the baseline, and any validate answer that was not a valid 200.
// A program, not a test: it prints figures and asserts nothing.
import { benchAccount, requireServices } from './fixture'
import { loadavg } from 'node:os'
import { newKeyValue } from '../../src/infra/crypto'
import { ADMIN_TOKEN, client, createDatabaseOn, newProduct } from '../support/harness'
import { fingerprint, startNodeProcess, type NodeProcess } from '../support/cluster'

requireServices('bun run bench:import', ['DATABASE_URL', 'NATS_URL'])

const ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 100_000)
const REQUESTS = Number(process.env.BENCH_IMPORT_REQUESTS ?? 10)
const CLIENTS = Number(process.env.BENCH_IMPORT_CLIENTS ?? 16)
const PARALLEL = Number(process.env.BENCH_IMPORT_PARALLEL ?? 2)
const RATE = Number(process.env.BENCH_IMPORT_RATE ?? 1000)
const BASELINE_MS = Number(process.env.BENCH_IMPORT_BASELINE_MS ?? 5_000)

const db = await createDatabaseOn(process.env.DATABASE_URL!, 'keyward_bench')
let node: NodeProcess | null = null
try {
  node = await startNodeProcess(db.url, { env: { LOG_LEVEL: 'error' } })
  const admin = client(node.url)
  const { token } = await benchAccount(admin)
  const product = await newProduct(admin, token)
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }

  // the keys validate runs over: imported too (500 rows), then validated once each (warm)
  const warm = Array.from({ length: 500 }, (_, i) => ({ key: `warm-${i}-${crypto.randomUUID()}`, device: fingerprint(i, 'aa') }))
  const seeded = await admin('POST', '/v1/keys/import', { token, body: { rows: warm.map((w) => ({ key: w.key, product_id: product.id })) } })
  if (seeded.status !== 201) throw new Error(`seed import failed: ${seeded.status} ${JSON.stringify(seeded.body)}`)
  const bodies = warm.map((w) => JSON.stringify({ key: w.key, device_fingerprint: w.device }))
  for (const body of bodies) await (await fetch(`${node.url}/v1/validate`, { method: 'POST', headers, body })).arrayBuffer()

  let answers = 0
  let failures = 0
  let running = true
  let latencies: number[] = []
  const p99 = () => latencies.sort((a, b) => a - b)[Math.floor(latencies.length * 0.99)] ?? 0
  const loop = async (c: number) => {
    // each client keeps its share of the rate on a schedule (a late answer is not made up by bursting)
    const every = RATE > 0 ? (1000 * CLIENTS) / RATE : 0
    let next = performance.now() + (every * c) / CLIENTS
    for (let i = c; running; i += CLIENTS) {
      if (every > 0) {
        const wait = next - performance.now()
        if (wait > 0) await Bun.sleep(wait)
        next = Math.max(next + every, performance.now())
      }
      const t0 = performance.now()
      const res = await fetch(`${node!.url}/v1/validate`, { method: 'POST', headers, body: bodies[i % bodies.length] })
      const a = (await res.json()) as { valid?: boolean }
      latencies.push(performance.now() - t0)
      if (res.status === 200 && a.valid === true) answers++
      else failures++
    }
  }
  const loops = Array.from({ length: CLIENTS }, (_, c) => loop(c))
  await Bun.sleep(500) // ramp
  answers = 0
  latencies = []
  let t = performance.now()
  await Bun.sleep(BASELINE_MS)
  const baseline = answers / ((performance.now() - t) / 1000)
  const baselineP99 = p99()

  const perRequest = Math.ceil(ROWS / REQUESTS)
  const files = Array.from({ length: REQUESTS }, (_, r) =>
    Array.from({ length: perRequest }, (_, i) => {
      const n = r * perRequest + i
      const row: Record<string, unknown> = {
        key: n % 3 === 0 ? newKeyValue() : `LEGACY-${n}-${Math.random().toString(36).slice(2, 10)}`,
        external_id: `old_${n}`,
        product_id: product.id,
        plan: n % 2 ? 'pro' : 'basic',
        metadata: { email: `customer${n}@example.com`, order: n },
      }
      if (n % 10 === 0) row.activations = [{ device_fingerprint: fingerprint(n, 'bb'), device_name: 'Laptop' }]
      return JSON.stringify(row)
    }).join('\n'),
  )
  answers = 0
  failures = 0
  latencies = []
  t = performance.now()
  const times: number[] = []
  let created = 0
  let nextFile = 0
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (nextFile < files.length) {
        const file = files[nextFile++]!
        const r0 = performance.now()
        const res = await fetch(`${node!.url}/v1/keys/import`, { method: 'POST', headers: { ...headers, 'content-type': 'application/x-ndjson' }, body: file })
        const body = (await res.json()) as { created?: number }
        if (res.status !== 201) throw new Error(`import failed: ${res.status} ${JSON.stringify(body).slice(0, 500)}`)
        created += body.created ?? 0
        times.push(performance.now() - r0)
      }
    }),
  )
  const seconds = (performance.now() - t) / 1000
  const during = answers / seconds
  const duringP99 = p99()
  running = false
  await Promise.all(loops)

  console.log(`load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${PARALLEL} request(s) at a time; validate at ${RATE || 'max'}/s`)
  console.log(`imported ${created.toLocaleString('en')} keys in ${REQUESTS} requests of ${perRequest.toLocaleString('en')} rows (NDJSON, ` +
    `${(files.reduce((s, f) => s + f.length, 0) / REQUESTS / 1024 / 1024).toFixed(1)} MB each): ${seconds.toFixed(1)} s (target < 30 s); ` +
    `per request ${times.map((x) => (x / 1000).toFixed(1)).join(' ')} s`)
  console.log(`validate (${CLIENTS} clients, 500 keys): ${Math.round(baseline).toLocaleString('en')}/s alone (p99 ${baselineP99.toFixed(1)} ms), ` +
    `${Math.round(during).toLocaleString('en')}/s during the import (ratio ${(during / baseline).toFixed(2)}; p99 ${duringP99.toFixed(1)} ms); ` +
    `answers not valid 200: ${failures}`)
} finally {
  await node?.stop()
  await db.drop()
}

// `bun run bench:export`: the node's memory while it streams a large export (issue: "1,000,000 keys
// export with the node's RSS growing < 100 MB"). Against the local Postgres and NATS:
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres NATS_URL=nats://127.0.0.1:4222 bun run bench:export
//   BENCH_EXPORT_KEYS=1000000 BENCH_EXPORT_FORMAT=ndjson|csv ...
//
// The keys are written in one SQL statement (not through the API: their values are never validated
// here, only exported), a tenth of them with a device. The node's RSS (/proc/<pid>/status) is sampled
// every 50 ms while the client reads the export as fast as it can without keeping it; the baseline,
// in the same run, is the same export filtered to one product holding 1% of the keys.
// A program, not a test: it prints figures and asserts nothing.
import { benchAccount, requireServices } from './fixture'
import { readFileSync } from 'node:fs'
import postgres from 'postgres'
import { ADMIN_TOKEN, client, createDatabaseOn, newProduct } from '../support/harness'
import { startNodeProcess, type NodeProcess } from '../support/cluster'

requireServices('bun run bench:export', ['DATABASE_URL', 'NATS_URL'])

const KEYS = Number(process.env.BENCH_EXPORT_KEYS ?? 1_000_000)
const FORMAT = process.env.BENCH_EXPORT_FORMAT ?? 'ndjson'
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) * 1024 : 0
}

/** Streams one export, sampling the node's RSS; returns rows, bytes, seconds and the RSS peak above the start. */
async function measure(node: NodeProcess, token: string, query: string) {
  const pid = node.proc.pid
  Bun.gc(true)
  const before = rssOf(pid)
  let peak = before
  const timer = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 50)
  const t0 = performance.now()
  const res = await fetch(`${node.url}/v1/keys/export?format=${FORMAT}${query}`, { headers: { authorization: `Bearer ${token}` } })
  let bytes = 0
  let rows = 0
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    bytes += chunk.byteLength
    for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) rows++
  }
  clearInterval(timer)
  peak = Math.max(peak, rssOf(pid))
  return { status: res.status, rows: FORMAT === 'csv' ? rows - 1 : rows, bytes, seconds: (performance.now() - t0) / 1000, before, growth: peak - before }
}

const db = await createDatabaseOn(process.env.DATABASE_URL!, 'keyward_bench')
let node: NodeProcess | null = null
try {
  node = await startNodeProcess(db.url, { env: { LOG_LEVEL: 'error' } })
  const admin = client(node.url)
  const { id: accountId, token } = await benchAccount(admin)
  const big = await newProduct(admin, token)
  const small = await newProduct(admin, token)
  const sql = postgres(db.url, { max: 1, onnotice: () => {} })
  const t0 = performance.now()
  try {
    // every 100th key is the small product's (the baseline); every 10th has a device
    await sql`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, activation_limit, metadata, created_at)
      select 'key_' || lpad(i::text, 26, '0'), ${accountId}, case when i % 100 = 0 then ${small.id} else ${big.id} end,
        encode(sha256(('bench-' || i)::bytea), 'hex'), 'BENCH', 3, jsonb_build_object('customer', 'c' || i),
        now() - make_interval(secs => ${KEYS} - i)
      from generate_series(1, ${KEYS}) i`
    await sql`insert into activations (id, account_id, key_id, product_id, device_fingerprint, device_name)
      select 'act_' || lpad(i::text, 26, '0'), ${accountId}, 'key_' || lpad(i::text, 26, '0'), ${big.id},
        encode(sha256(('device-' || i)::bytea), 'hex'), 'Laptop'
      from generate_series(10, ${KEYS}, 10) i where i % 100 <> 0`
    await sql`vacuum analyze license_keys`
    await sql`vacuum analyze activations`
  } finally {
    await sql.end()
  }
  console.log(`${KEYS.toLocaleString('en')} keys written in ${((performance.now() - t0) / 1000).toFixed(1)} s; format ${FORMAT}`)

  const base = await measure(node, token, `&product_id=${small.id}`)
  const full = await measure(node, token, '')
  for (const [name, m] of [['baseline (1% of the keys)', base], ['all keys', full]] as const) {
    console.log(
      `${name}: ${m.status}, ${m.rows.toLocaleString('en')} rows, ${mb(m.bytes)} MB in ${m.seconds.toFixed(1)} s ` +
        `(${Math.round(m.rows / m.seconds).toLocaleString('en')} rows/s); node RSS ${mb(m.before)} MB at start, peak growth ${mb(m.growth)} MB`,
    )
  }
  console.log(`RSS growth exporting ${full.rows.toLocaleString('en')} keys: ${mb(full.growth)} MB (target < 100 MB); ` +
    `ratio to the baseline's growth: ${(full.growth / Math.max(base.growth, 1)).toFixed(2)}× for ${(full.rows / Math.max(base.rows, 1)).toFixed(0)}× the rows`)
} finally {
  await node?.stop()
  await db.drop()
}

// `bun run bench:analytics`: latency of the three analytics routes for one account holding 1,000,000
// keys and 3,000,000 activations (90 days, 30 countries, 20 products), and what the rollup triggers
// cost the new-device write path. Prints figures; asserts nothing (benchmarks are programs, not tests).
//
//   bun run bench:analytics                      real Postgres at postgres://postgres@127.0.0.1:5432/postgres
//   DATABASE_URL=postgres://user@host:5432/db BENCH_KEYS=1000000 BENCH_ACTIVATIONS=3000000 bun run bench:analytics
//
// A fresh database is created for the run and dropped at the end. Seeding is plain
// `insert ... select generate_series` (the same triggers count it as they count takeSeat's inserts).
import { DEVICE } from '../../src/modules/events/outbox'
import postgres from 'postgres'
import { loadConfig } from '../../src/config'
import { createLogger } from '../../src/infra/log'
import { takeSeat, lockKeyForSeat } from '../../src/modules/activations/repo'
import { createAccount } from '../../src/modules/accounts/service'
import { startNode } from '../../src/node'
import { median } from './stats'

const BASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000_000)
const ACTIVATIONS = Number(process.env.BENCH_ACTIVATIONS ?? 3_000_000)
const CALLS = Number(process.env.BENCH_CALLS ?? 25)
const PRODUCTS = 20
const WRITES = 400 // new-device transactions per write-path run
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const COUNTRIES = ['US', 'DE', 'GB', 'FR', 'IN', 'BR', 'JP', 'CA', 'AU', 'NL', 'ES', 'IT', 'PL', 'SE', 'CH',
  'KR', 'MX', 'TR', 'AT', 'BE', 'DK', 'NO', 'FI', 'IE', 'PT', 'CZ', 'RO', 'UA', 'ZA', 'AR']

const ms = (t0: number) => performance.now() - t0
const fmt = (v: number) => (v < 10 ? v.toFixed(2) : v.toFixed(1))
const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.95) - 1)]

async function step<T>(label: string, run: () => Promise<T>): Promise<T> {
  const t0 = performance.now()
  process.stdout.write(`  ${label} ... `)
  const out = await run()
  console.log(`${(ms(t0) / 1000).toFixed(1)} s`)
  return out
}

const dbName = `keyward_bench_analytics_${Date.now().toString(36)}`
const admin = postgres(BASE_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database ${dbName}`)
const url = new URL(BASE_URL)
url.pathname = `/${dbName}`

const config = loadConfig({
  DATABASE_URL: url.toString(),
  SECRET_KEY: 'cd'.repeat(32),
  PORT: '0',
  HOST: '127.0.0.1',
  LOG_LEVEL: 'silent',
  DEMO_ACCOUNT: 'false',
  // keep the seeded "not yet swept" keys as they are: the overview must discount them itself
  SWEEP_INTERVAL_MS: '3600000',
})
const node = await startNode(config, { log: createLogger('silent') })
const sql = node.deps.sql
// a separate connection for bulk work (session settings, long statements)
const bulk = postgres(url.toString(), { max: 1, onnotice: () => {} })

try {
  console.log(`Analytics benchmark: ${KEYS.toLocaleString()} keys, ${ACTIVATIONS.toLocaleString()} activations, one account`)
  console.log(`database ${dbName} (dropped at the end)\n\nSeeding:`)
  const { account, api_key } = await createAccount(sql, { name: 'Bench', plan: 'growth' })
  const acct = account.id
  const other = await createAccount(sql, { name: 'Neighbour', plan: 'growth' })
  await bulk`set synchronous_commit = off`
  await bulk`set maintenance_work_mem = '256MB'`
  await bulk`set work_mem = '64MB'`
  await bulk`insert into products (id, account_id, name, slug)
    select 'prod_' || lpad(p::text, 26, '0'), ${acct}, 'Product ' || p, 'product-' || p from generate_series(0, ${PRODUCTS - 1}) p`

  // 70% perpetual, 25% expiring over the next year, 3% expired (swept), 2% revoked; one key in 2,000
  // of the expiring ones is already past expires_at but not yet swept.
  const chunk = 250_000
  await step(`${KEYS.toLocaleString()} keys`, async () => {
    for (let from = 0; from < KEYS; from += chunk) {
      const to = Math.min(KEYS, from + chunk) - 1
      await bulk`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, plan, status,
          activation_limit, expires_at, created_at, revoked_at)
        select 'key_' || lpad(i::text, 26, '0'), ${acct}, 'prod_' || lpad((i % ${PRODUCTS})::text, 26, '0'),
          md5('bench-key-' || i), 'ABCDE', 'pro',
          case when i % 100 >= 98 then 'revoked' when i % 100 >= 95 then 'expired' else 'active' end,
          6,
          case when i % 100 < 70 then null
               when i % 100 < 95 and i % 2000 = 71 then now() - interval '1 hour'
               when i % 100 < 95 then now() + make_interval(hours => (i % 8760) + 1)
               else now() - make_interval(days => (i % 300) + 1) end,
          now() - make_interval(days => (i % 400)),
          case when i % 100 >= 98 then now() - interval '1 day' end
        from generate_series(${from}::int, ${to}::int) i`
    }
  })
  // Activations: 3 per key on average, over the last 90 days (some today), 30 countries with a skew
  // towards the first ones, 2% without a country, 20% since deactivated.
  await step(`${ACTIVATIONS.toLocaleString()} activations`, async () => {
    for (let from = 0; from < ACTIVATIONS; from += 2 * chunk) {
      const to = Math.min(ACTIVATIONS, from + 2 * chunk) - 1
      await bulk`insert into activations (id, account_id, key_id, product_id, device_fingerprint, country, status, activated_at)
        select 'act_' || lpad(i::text, 26, '0'), ${acct}, 'key_' || lpad((i % ${KEYS})::text, 26, '0'),
          'prod_' || lpad(((i % ${KEYS}) % ${PRODUCTS})::text, 26, '0'),
          md5('fp-a-' || i) || md5('fp-b-' || i),
          case when i % 50 = 0 then null else (${COUNTRIES}::text[])[1 + floor(30 * power(random(), 2))::int] end,
          case when i % 5 = 0 then 'deactivated' else 'active' end,
          now() - random() * interval '90 days'
        from generate_series(${from}::int, ${to}::int) i`
    }
  })
  await step('vacuum analyze', async () => {
    for (const t of ['license_keys', 'activations', 'products', 'analytics_key_counts', 'analytics_daily_activations',
      'analytics_country_activations']) await bulk.unsafe(`vacuum analyze ${t}`)
  })
  const [sizes] = await bulk`select
    (select count(*)::int from analytics_daily_activations) as daily_rows,
    (select count(*)::int from analytics_country_activations) as country_rows`
  console.log(`  rollup rows: ${sizes.daily_rows} daily, ${sizes.country_rows} per country`)

  // ---------------------------------------------------------------------------------------------
  const token = api_key.token
  const get = async (path: string) => {
    const t0 = performance.now()
    const res = await fetch(`${node.url}/v1/analytics/${path}`, { headers: { authorization: `Bearer ${token}` } })
    const body = await res.json()
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`)
    return { t: ms(t0), body }
  }
  const product = `prod_${'0'.repeat(25)}7`
  const routes = ['overview', 'activations', 'activations?range=30d', 'activations?range=90d',
    `activations?range=90d&product_id=${product}`, 'geography']
  console.log(`\nLatency over HTTP (node in this process, real Postgres; ${CALLS} calls each after 3 warm-ups):\n`)
  console.log(`  ${'route'.padEnd(58)} median ms   p95 ms   min ms`)
  const results: Record<string, unknown> = {}
  for (const path of routes) {
    for (let i = 0; i < 3; i++) results[path] = (await get(path)).body
    const times: number[] = []
    for (let i = 0; i < CALLS; i++) times.push((await get(path)).t)
    const label = `GET /v1/analytics/${path.replace(product, 'prod_…7')}`
    console.log(`  ${label.padEnd(58)} ${fmt(median(times)).padStart(9)} ${fmt(p95(times)).padStart(8)} ${fmt(Math.min(...times)).padStart(8)}`)
  }
  // Baseline in the same run: the cheapest authenticated route.
  const pings: number[] = []
  for (let i = 0; i < CALLS + 3; i++) {
    const t0 = performance.now()
    await (await fetch(`${node.url}/v1/ping`, { headers: { authorization: `Bearer ${token}` } })).json()
    if (i >= 3) pings.push(ms(t0))
  }
  console.log(`  ${'GET /v1/ping (baseline, no query)'.padEnd(58)} ${fmt(median(pings)).padStart(9)} ${fmt(p95(pings)).padStart(8)} ${fmt(Math.min(...pings)).padStart(8)}`)
  const overview = results.overview as Record<string, number>
  const geography = results.geography as { country: string; activations: number }[]
  console.log(`\n  overview: ${JSON.stringify(overview)}`)
  console.log(`  geography: ${geography.length} countries, top ${geography.slice(0, 3).map((g) => `${g.country} ${g.activations}`).join(', ')}`)
  const [check] = await bulk`select
    (select count(*)::int from license_keys where account_id = ${acct}) as total_keys,
    (select count(*)::int from activations where account_id = ${acct}) as total_activations,
    (select count(*)::int from license_keys where account_id = ${acct} and status = 'active'
       and (expires_at is null or expires_at > now())) as active_keys`
  const same = check.total_keys === overview.total_keys && check.total_activations === overview.total_activations &&
    check.active_keys === overview.active_keys
  console.log(`  counted from the base tables: ${JSON.stringify(check)} → ${same ? 'equal' : 'DIFFERENT'}`)

  // The only reads that touch the big tables: both walk the partial index, not the table.
  for (const [what, cond] of [
    ['not yet swept', bulk`expires_at <= now()`],
    ['expiring_soon', bulk`expires_at > now() and expires_at <= now() + interval '7 days'`],
  ] as const) {
    const plan = await bulk`explain (analyze, costs off, timing off, summary off) select count(*) from license_keys
      where account_id = ${acct} and status = 'active' and expires_at is not null and ${cond}`
    const lines = plan.map((r) => String(r['QUERY PLAN']).trim()).filter((l) => /Scan|Heap Fetches/.test(l))
    console.log(`  plan (${what}): ${lines.join('; ')}`)
  }

  // ---------------------------------------------------------------------------------------------
  // The write path: the new-device transaction (lock key, count slots, insert activation + event) of
  // the validate route, with the rollup triggers and with them disabled, one at a time and 8 at once
  // on keys of the same account, product and day (the hot-row case).
  console.log(`\nNew-device transactions (takeSeat: lock key, count slots, insert activation + event; ${WRITES} per run,`)
  console.log(`median of ${ROUNDS} interleaved rounds). "hot": 8 writers on one product and country of one account today,`)
  console.log(`the rows they all update; "spread": each writer on its own product and country.\n`)
  console.log('  rollup triggers   writers        median ms     tx/s')
  const writerProducts = Array.from({ length: 8 }, (_, w) => `prod_W${String(w).padStart(25, '0')}`)
  await bulk`insert into products (id, account_id, name, slug)
    select p, ${other.account.id}, p, lower(p) from unnest(${writerProducts}::text[]) p`
  let serial = 0
  const freshKeys = async (n: number, productOf: (i: number) => string) => {
    const ids = Array.from({ length: n }, (_, i) => `key_W${String(serial + i).padStart(25, '0')}`)
    const products = ids.map((_, i) => productOf(i))
    serial += n
    await bulk`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, activation_limit)
      select v.id, ${other.account.id}, v.p, md5('bench-w-' || v.id), 'ABCDE', 5
      from unnest(${ids}::text[], ${products}::text[]) as v(id, p)`
    return ids
  }
  const newDevice = async (keyId: string, country: string) => {
    const t0 = performance.now()
    await sql.begin(async (tx) => {
      const key = (await lockKeyForSeat(tx, other.account.id, { id: keyId }))!
      const fingerprint = crypto.getRandomValues(new Uint8Array(32)).reduce((s, b) => s + b.toString(16).padStart(2, '0'), '')
      await takeSeat(tx, key, { fingerprint, appVersion: '1.0', country }, DEVICE)
    })
    return ms(t0)
  }
  const cases = [
    { name: '1', writers: 1, spread: false },
    { name: '8 hot', writers: 8, spread: false },
    { name: '8 spread', writers: 8, spread: true },
  ]
  const runs = new Map<string, { latency: number[]; rate: number[] }>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const triggers of [true, false]) {
      await bulk.unsafe(`alter table activations ${triggers ? 'enable' : 'disable'} trigger analytics_activations_insert`)
      for (const c of cases) {
        // writer w takes keys w, w + writers, ...: with spread, all of product w, country w
        const keys = await freshKeys(WRITES, (i) => writerProducts[c.spread ? i % c.writers : 0])
        const times: number[] = []
        const t0 = performance.now()
        await Promise.all(
          Array.from({ length: c.writers }, async (_, w) => {
            for (let i = w; i < keys.length; i += c.writers) times.push(await newDevice(keys[i], COUNTRIES[c.spread ? w : 0]))
          }),
        )
        const run = runs.get(`${triggers ? 'on' : 'off'}|${c.name}`) ?? { latency: [], rate: [] }
        run.latency.push(median(times))
        run.rate.push(WRITES / (ms(t0) / 1000))
        runs.set(`${triggers ? 'on' : 'off'}|${c.name}`, run)
      }
    }
  }
  for (const [label, run] of runs) {
    const [triggers, writers] = label.split('|')
    console.log(`  ${triggers.padEnd(17)} ${writers.padEnd(10)} ${fmt(median(run.latency)).padStart(11)} ${median(run.rate).toFixed(0).padStart(8)}`)
  }
  await bulk.unsafe('alter table activations enable trigger analytics_activations_insert')
} finally {
  await bulk.end()
  await node.stop()
  await admin.unsafe(`drop database if exists ${dbName} with (force)`)
  await admin.end()
}

// `bun test/bench/inactivity-release.ts`: the inactivity release job at scale. A fresh database holds
// 1,000,000 active activations (100,000 keys × 10 devices, every key releasing after an hour) of which
// 10,000 are idle for longer (one on each of 10,000 keys: 10,000 invalidations per sweep, the worst
// spread). Reports the time of a sweep that releases them (re-armed between rounds), of a sweep with
// nothing due (what every node pays every second), and the validate fast path's in-process calls per
// second with and without a sweep running in the same process.
//
//   DATABASE_URL=postgres://… bun test/bench/inactivity-release.ts   (NATS_URL too: invalidations over NATS)
//   BENCH_ROUNDS=3 BENCH_IDLE_SWEEPS=50 BENCH_KEYS=100000 (devices: 10 per key; due: one on every tenth key)
import { releaseGraceMs, releaseInactiveActivations } from '../../src/modules/activations/inactivity-release'
import { fastValidate } from '../../src/modules/validation/fast-path'
import { prepareBenchKey } from './fixture'
import { median } from './stats'
import { startInProcessNode } from './servers'
import { Signers } from '../../src/modules/signing/signers'

if (!process.env.DATABASE_URL) throw new Error('DATABASE_URL is required (a real Postgres)')
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const IDLE_SWEEPS = Number(process.env.BENCH_IDLE_SWEEPS ?? 50)
const KEYS = Number(process.env.BENCH_KEYS ?? 100_000)
const PER_KEY = 10
const DUE = KEYS / 10
const KNOWN_KEYS = 100

const { node, stop } = await startInProcessNode('release', {
  ...(process.env.NATS_URL ? { NATS_URL: process.env.NATS_URL } : {}),
  SWEEP_INTERVAL_MS: '3600000', // this program runs the sweeps itself
})
const config = node.deps.config
const sql = node.deps.sql
const graceMs = releaseGraceMs(config.flushIntervalMs)
const sweep = () => releaseInactiveActivations(node.deps, { graceMs })

try {
  const { token } = await prepareBenchKey(node.url)
  const [{ account_id, product_id }] = await sql<{ account_id: string; product_id: string }[]>`
    select account_id, product_id from license_keys limit 1`

  // Known keys for the validate load: created through the API, one device each.
  const bodies: string[] = []
  for (let i = 0; i < KNOWN_KEYS; i++) {
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
    const key: any = await (await fetch(`${node.url}/v1/keys`, { method: 'POST', headers, body: JSON.stringify({ product_id, activation_limit: 3 }) })).json()
    const body = JSON.stringify({ key: key.key_value, device_fingerprint: `${i}`.padStart(64, 'f'), app_version: '1.0.0' })
    const first: any = await (await fetch(`${node.url}/v1/validate`, { method: 'POST', headers, body })).json()
    if (first.valid !== true) throw new Error(`known key does not validate: ${JSON.stringify(first)}`)
    bodies.push(body)
  }

  let t = performance.now()
  await sql`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, activation_limit, release_after_seconds)
    select 'key_bench' || lpad(i::text, 17, '0'), ${account_id}, ${product_id}, md5('bench' || i), 'BENCH', ${PER_KEY}, 3600
    from generate_series(1, ${KEYS}) i`
  // device j of key i; device 1 of keys 1..DUE has been silent for two hours, every other one validated lately
  await sql`insert into activations (id, account_id, key_id, product_id, device_fingerprint, activated_at, last_validated_at, release_after_seconds)
    select 'act_bench' || lpad((i * 100 + j)::text, 17, '0'), ${account_id}, 'key_bench' || lpad(i::text, 17, '0'), ${product_id},
      md5(i || '/' || j) || md5(j || '/' || i), now() - interval '3 hours',
      case when j = 1 and i <= ${DUE} then now() - interval '2 hours' else now() - random() * interval '30 minutes' end,
      3600
    from generate_series(1, ${KEYS}) i, generate_series(1, ${PER_KEY}) j`
  await sql`analyze license_keys`
  await sql`analyze activations`
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from activations where status = 'active'`
  console.log(`seeded ${n.toLocaleString('en')} active activations (${DUE.toLocaleString('en')} due) in ${((performance.now() - t) / 1000).toFixed(1)} s`)

  const handle = fastValidate(node.deps, node.deps.validation, new Signers(node.deps.sql, node.deps.secretKey))
  const headers = bodies.map((b) => ({
    host: '127.0.0.1',
    'content-type': 'application/json',
    authorization: `Bearer ${token}`,
    'content-length': String(Buffer.byteLength(b)),
  }))
  /** Validate calls per second until `done` settles (or for `ms`), yielding to the event loop every 200 calls. */
  async function validateRate(done: Promise<unknown> | null, ms = 2_000): Promise<number> {
    let finished = false
    done?.then(() => (finished = true))
    const start = performance.now()
    let calls = 0
    while (done ? !finished : performance.now() - start < ms) {
      for (let i = 0; i < 200; i++) {
        const res = await handle(new Request('http://127.0.0.1/v1/validate', { method: 'POST', headers: headers[calls % KNOWN_KEYS], body: bodies[calls % KNOWN_KEYS] }))
        if (res.status !== 200) throw new Error(`status ${res.status}`)
        calls++
      }
      await new Promise((r) => setImmediate(r))
    }
    return calls / ((performance.now() - start) / 1000)
  }

  await validateRate(null, 2_000) // warm-up (JIT, hot state)
  const plan = await sql.unsafe(`explain select id from activations
    where status = 'active' and release_after_seconds is not null
      and timezone('UTC', coalesce(last_validated_at, activated_at)) + make_interval(secs => release_after_seconds)
          <= timezone('UTC', now()) - make_interval(secs => 2)`)
  console.log(`due-rows plan: ${plan.map((r: any) => r['QUERY PLAN']).join(' | ')}`)

  const sweepMs: number[] = []
  const released: number[] = []
  const quiet: number[] = []
  const during: number[] = []
  const alone: number[] = []
  const rearm = () => sql`update activations set status = 'active', deactivated_at = null, deactivation_reason = null,
      last_validated_at = now() - interval '2 hours'
    where deactivation_reason = 'inactive' and key_id like 'key_bench%'`
  for (let round = 0; round < ROUNDS; round++) {
    // alone: nothing else runs in this process
    t = performance.now()
    released.push(await sweep())
    alone.push(performance.now() - t)
    await rearm()
    // under load: the validate fast path runs in the same process
    quiet.push(await validateRate(null, 2_000))
    t = performance.now()
    let count = 0
    const running = sweep().then((c) => {
      count = c
      sweepMs.push(performance.now() - t)
    })
    during.push(await validateRate(running))
    if (count !== released[round]) throw new Error(`released ${count} under load, ${released[round]} alone`)
    await rearm() // the same devices active again and two hours idle
  }
  // nothing due any more: the idle sweep is what every node pays every second
  await sql`update activations set last_validated_at = now() where key_id like 'key_bench%' and last_validated_at < now() - interval '1 hour'`
  const idle: number[] = []
  for (let i = 0; i < IDLE_SWEEPS + 1; i++) {
    t = performance.now()
    const c = await sweep()
    if (c !== 0) throw new Error(`an idle sweep released ${c}`)
    if (i > 0) idle.push(performance.now() - t)
  }

  console.log(`inactivity release, ${n.toLocaleString('en')} active activations, ${DUE.toLocaleString('en')} due on as many keys (${ROUNDS} rounds, medians):`)
  console.log(`  sweep releasing ${median(released).toLocaleString('en')} activations: ${median(alone).toFixed(0)} ms alone ` +
    `(${((median(alone) * 1000) / DUE).toFixed(0)} µs per release: update, event, invalidation), ` +
    `${median(sweepMs).toFixed(0)} ms beside the validate load`)
  console.log(`  sweep with nothing due (one index probe): ${median(idle).toFixed(2)} ms (median of ${IDLE_SWEEPS})`)
  console.log(`  validate fast path in process: ${median(quiet).toFixed(0)} calls/s without a sweep, ` +
    `${median(during).toFixed(0)} calls/s during a sweep (${((median(during) / median(quiet)) * 100).toFixed(0)}%)`)
} finally {
  await stop()
}

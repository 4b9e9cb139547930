// `bun run bench:variants`: validate's throughput, p90/p99 and CPU per request by thread for node
// processes that differ in their environment (or their checkout), against the strict minimal endpoint,
// in alternating wrk rounds of one run. For questions such as "does this setting move the tail?": the
// figures of `bun run bench` move ±10% between runs on this VM, so variants are compared side by side.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun run bench:variants
//   BENCH_VARIANTS='{"default":{},"small cache":{"CACHE_MAX_KEYS":"10000"}}' BENCH_ROUNDS=5 bun run bench:variants
//   A variant's ROOT runs the node of another checkout (e.g. a `git worktree` of an older commit).
//   BENCH_NONCE=bench-nonce-0123456789abcdef_XYZ: signed validate (e.g. before/after a change to signing);
//   BENCH_SIGNING_KEY=1 with it: signed by an active signing key (answers carry its certificate), not the root.
//   BENCH_COMPONENTS=1: machine identity on one node: the same key and device validated without and
//   with five components (rule off), and a key with component_match most validated with them (the
//   target: with components ≥ 0.95x of without, docs/integrating.md "Identifying machines").
//
// A program, not a test: it prints figures and asserts nothing.
import { spawn, spawnSync } from 'bun'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDatabaseOn } from '../support/harness'
import { ADMIN_TOKEN, prepareBenchKey, type BenchKey } from './fixture'
import { median } from './stats'
import { freePort, waitFor } from './servers'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4)
/** A Keyward-Nonce every request carries (the server keeps no nonce state: as costly as a fresh one each time). */
const NONCE = process.env.BENCH_NONCE ?? ''

const VARIANTS: Record<string, Record<string, string>> = JSON.parse(
  process.env.BENCH_VARIANTS ?? '{"default":{},"background jobs idle":{"FLUSH_INTERVAL_MS":"600000","SWEEP_INTERVAL_MS":"600000"},"no access log":{"LOG_LEVEL":"warn"}}',
)
const ROOT = join(import.meta.dir, '..', '..')

/** CPU (ms) used so far by each thread of `pid`, by thread name (digits folded, so pools add up). */
function threadCpu(pid: number): Record<string, number> {
  const m: Record<string, number> = {}
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8')
      const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')).replace(/[0-9]+/g, '#')
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
      m[name] = (m[name] ?? 0) + (Number(f[11]) + Number(f[12])) * 10 // utime + stime, USER_HZ 100
    } catch {
      // the thread ended meanwhile
    }
  }
  return m
}

const ms = (text: string) => {
  const m = /([\d.]+)(us|ms|s)/.exec(text)
  return m ? Number(m[1]) * (m[2] === 'us' ? 0.001 : m[2] === 's' ? 1000 : 1) : NaN
}

const db = await createDatabaseOn(process.env.DATABASE_URL!, 'keyward_bench')
const dir = mkdtempSync(join(tmpdir(), 'keyward-bench-variants-'))
const children: ReturnType<typeof spawn>[] = []
try {
  const start = async (args: string[], extra: Record<string, string>) => {
    const port = await freePort()
    const env = { ...process.env, PORT: String(port), BENCH_PORT: String(port), HOST: '127.0.0.1', ADMIN_TOKEN, SECRET_KEY: 'ab'.repeat(32),
      LOG_LEVEL: 'info', DEMO_ACCOUNT: 'false', DATA_DIR: mkdtempSync(join(dir, 'node-')), DATABASE_URL: db.url!, ...extra } as Record<string, string>
    delete env.NATS_URL
    delete env.REDIS_URL
    // stdout (the access log) to a file, as deployed
    const child = spawn(['bun', ...args], { env, stdout: Bun.file(join(dir, `stdout-${port}.log`)), stderr: 'inherit' })
    children.push(child)
    await waitFor(`http://127.0.0.1:${port}/healthz`)
    return { url: `http://127.0.0.1:${port}`, pid: child.pid }
  }
  const servers: { name: string; url: string; pid: number; key: BenchKey }[] = []
  if (process.env.BENCH_COMPONENTS === '1') {
    const node = await start([join(ROOT, 'src/main.ts')], {})
    const off = await prepareBenchKey(node.url, { componentMatch: 'off' })
    servers.push({ name: 'without components', ...node, key: { ...off, body: off.bodyWithout! } })
    servers.push({ name: 'with components (rule off)', ...node, key: off })
    servers.push({ name: 'with components (rule most)', ...node, key: await prepareBenchKey(node.url, { componentMatch: 'most' }) })
  } else for (const [name, extra] of Object.entries(VARIANTS)) {
    const { ROOT: root, ...env } = extra
    const s = await start([join(root ?? ROOT, 'src/main.ts')], env)
    servers.push({ name, ...s, key: await prepareBenchKey(s.url) })
  }
  const first = servers[0]!.key
  const strict = await start([join(import.meta.dir, 'validate.ts'), 'strict'], { BENCH_KEY: first.keyValue, BENCH_FP: first.fingerprint, BENCH_ANSWER: first.answer })
  servers.push({ name: '(s) strict minimal endpoint', ...strict, key: first })

  const results = servers.map(() => ({ rps: [] as number[], p90: [] as number[], p99: [] as number[], cpu: {} as Record<string, number>, requests: 0 }))
  const script = join(dir, 'post.lua')
  for (let round = 0; round <= ROUNDS; round++) { // round 0 warms up (JIT, pools) and is not counted
    for (const [i, s] of servers.entries()) {
      writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(s.key.body)}\nwrk.headers["Content-Type"] = "application/json"\n` +
        `wrk.headers["Authorization"] = "Bearer ${s.key.token}"\n` +
        // BENCH_NONCE: signed validate (one Ed25519 signature per answer) on the nodes; the strict endpoint ignores it
        (NONCE ? `wrk.headers["Keyward-Nonce"] = ${JSON.stringify(NONCE)}\n` : ''))
      const before = threadCpu(s.pid)
      const out = spawnSync(['wrk', '-t2', '-c50', `-d${SECONDS}s`, '--latency', '-s', script, `${s.url}/v1/validate`]).stdout.toString()
      if (round === 0) continue
      const r = results[i]!
      const after = threadCpu(s.pid)
      for (const k of Object.keys(after)) r.cpu[k] = (r.cpu[k] ?? 0) + after[k]! - (before[k] ?? 0)
      r.requests += Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
      r.rps.push(Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN))
      r.p90.push(ms(/\s90%\s+(\S+)/.exec(out)?.[1] ?? ''))
      r.p99.push(ms(/\s99%\s+(\S+)/.exec(out)?.[1] ?? ''))
    }
  }
  const s = results.at(-1)!
  if (process.env.BENCH_COMPONENTS === '1') {
    const base = results[0]!
    for (const i of [1, 2]) {
      const ratio = median(results[i]!.rps.map((x, k) => x / base.rps[k]!))
      console.log(`${servers[i]!.name}: ${ratio.toFixed(3)}x the throughput of ${servers[0]!.name} (paired within rounds; target ≥ 0.95x)`)
    }
  }
  console.log(`validate, ${ROUNDS} alternating rounds of wrk -t2 -c50 -d${SECONDS}s (medians; ratios to (s) paired within rounds):`)
  for (const [i, srv] of servers.entries()) {
    const r = results[i]!
    const toS = median(r.rps.map((x, k) => x / s.rps[k]!))
    const p99ToS = median(r.p99.map((x, k) => x / s.p99[k]!))
    const threads = Object.entries(r.cpu).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${((v * 1000) / r.requests).toFixed(2)}`).join(', ')
    console.log(`  ${srv.name.padEnd(28)} ${median(r.rps).toFixed(0).padStart(6)} req/s (${toS.toFixed(2)}x of (s))  p90 ${median(r.p90).toFixed(2)} ms  ` +
      `p99 ${median(r.p99).toFixed(2)} ms (${p99ToS.toFixed(2)}x of (s); rounds ${r.p99.map((x) => x.toFixed(1)).join(' ')})`)
    console.log(`  ${''.padEnd(28)} CPU µs per request by thread: ${threads}`)
  }
} finally {
  for (const c of children) c.kill()
  await Promise.all(children.map((c) => c.exited))
  await db.drop()
  rmSync(dir, { recursive: true, force: true })
}

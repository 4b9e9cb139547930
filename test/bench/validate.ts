// `bun run bench`: throughput and latency of POST /v1/validate for a known key and device, full stack
// (auth, quota counting, last-seen batching, access log), against two baselines started in the same
// run, plus the resident memory of a node holding 1,000,000 keys in its hot state. Prints figures;
// asserts nothing (benchmarks are programs, not tests).
//
//   bun run bench                      embedded Postgres (PGlite) unless DATABASE_URL is set
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun run bench
//   BENCH_ROUNDS=5 BENCH_SECONDS=5 BENCH_CONNECTIONS=50 BENCH_KEYS=1000000 bun run bench
//
// The servers are measured in rounds, one after another within each round, and every figure is the
// median over the rounds; each ratio is the median of the ratios within a round (servers measured
// seconds apart). On a shared 2-core VM a single run of one server can be 40% off its usual figure:
// one measurement per server would let a noisy moment decide the ratio.
//
// Every server runs in its own process; the load generator is wrk (apt-get install -y wrk) when
// installed, else a fetch loop in this process (noted in the output; far less precise).
import { spawn, spawnSync } from 'bun'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { hashKeyValue, normalizeKeyValue } from '../../src/infra/crypto'
import { createDatabaseOn } from '../support/harness'
import { ADMIN_TOKEN, prepareBenchKey } from './fixture'
import { median } from './stats'
import { freePort, waitFor } from './servers'
import { startHeavyRoles } from './validate-roles'
import { startBenchRelay } from './relay'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000_000)
const SECRET_KEY = 'ab'.repeat(32)
const ROOT = join(import.meta.dir, '..', '..')

const role = process.argv[2]
if (role) {
  await startHeavyRoles(role)
} else {
  await main()
}

interface Load {
  rps: number
  p50: number
  p99: number
  errors: number
}

function hasWrk(): boolean {
  try {
    return spawnSync(['wrk', '--version']).exitCode !== null
  } catch {
    return false
  }
}

function parseMs(text: string): number {
  const m = /([\d.]+)(us|ms|s)/.exec(text)
  if (!m) return NaN
  const v = Number(m[1])
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v
}

async function wrk(url: string, token: string, body: string, seconds: number): Promise<Load> {
  const dir = mkdtempSync(join(tmpdir(), 'keyward-bench-'))
  const script = join(dir, 'post.lua')
  writeFileSync(
    script,
    `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\n` +
      `wrk.headers["Authorization"] = "Bearer ${token}"\n`,
  )
  const out = spawnSync(['wrk', '-t2', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, url]).stdout.toString()
  rmSync(dir, { recursive: true, force: true })
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN)
  const p50 = parseMs(/\s50%\s+(\S+)/.exec(out)?.[1] ?? '')
  const p99 = parseMs(/\s99%\s+(\S+)/.exec(out)?.[1] ?? '')
  const errors = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
  return { rps, p50, p99, errors }
}

/** Fallback load generator: CONNECTIONS concurrent fetch loops in this process. */
async function fetchLoad(url: string, token: string, body: string, seconds: number): Promise<Load> {
  const times: number[] = []
  let errors = 0
  const until = performance.now() + seconds * 1000
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now()
        const res = await fetch(url, { method: 'POST', headers, body })
        await res.arrayBuffer()
        if (res.status !== 200) errors++
        times.push(performance.now() - t0)
      }
    }),
  )
  times.sort((a, b) => a - b)
  return { rps: times.length / seconds, p50: times[Math.floor(times.length * 0.5)], p99: times[Math.floor(times.length * 0.99)], errors }
}

/** CPU seconds (user + system, all threads) a process has used so far; null where /proc is missing. */
function cpuSeconds(pid: number | undefined): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100 // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return null
  }
}

interface Measured extends Load {
  /** Server CPU per answered request, in µs: robust to other load on the machine, unlike req/s. */
  cpuUs: number | null
}

async function measure(target: { url: string; pid?: number; auth: { token: string; body: string } }, useWrk: boolean): Promise<Measured> {
  const run = useWrk ? wrk : fetchLoad
  const before = cpuSeconds(target.pid)
  const load = await run(target.url, target.auth.token, target.auth.body, SECONDS)
  const after = cpuSeconds(target.pid)
  const cpuUs = before === null || after === null ? null : ((after - before) * 1e6) / (load.rps * SECONDS)
  return { ...load, cpuUs }
}

function summary(name: string, runs: Measured[]): Measured {
  const m: Measured = {
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    cpuUs: runs.some((r) => r.cpuUs === null) ? null : median(runs.map((r) => r.cpuUs!)),
  }
  const spread = `${Math.min(...runs.map((r) => r.rps)).toFixed(0)}–${Math.max(...runs.map((r) => r.rps)).toFixed(0)}`
  const errs = m.errors ? `  (${m.errors} non-2xx!)` : ''
  const cpu = m.cpuUs === null ? '' : `   CPU ${m.cpuUs.toFixed(1).padStart(5)} µs/req`
  console.log(
    `${name.padEnd(44)} ${m.rps.toFixed(0).padStart(7)} req/s (${spread.padStart(13)})   p50 ${m.p50.toFixed(2).padStart(5)} ms   p99 ${m.p99.toFixed(2).padStart(5)} ms${cpu}${errs}`,
  )
  return m
}

/** Median and range of the per-round ratios x[i] / y[i]. */
function ratio(label: string, x: Measured[], y: Measured[], target: string) {
  const r = x.map((m, i) => m.rps / y[i].rps)
  console.log(`${label} = ${median(r).toFixed(2)}x   (rounds ${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)})${target ? `   ${target}` : ''}`)
}

async function createBenchDatabase(): Promise<{ url: string | null; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL
  return base ? createDatabaseOn(base, 'keyward_bench') : { url: null, async drop() {} }
}

async function main() {
  const useWrk = hasWrk()
  const db = await createBenchDatabase()
  const dataDir = mkdtempSync(join(tmpdir(), 'keyward-bench-data-'))
  const children: ReturnType<typeof spawn>[] = []
  const env = (extra: Record<string, string>) => ({ ...process.env, ...extra }) as Record<string, string>
  try {
    console.log(`Keyward validate benchmark: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s per server, load by ${useWrk ? 'wrk' : 'fetch loop (wrk not installed)'}`)
    console.log(`Postgres: ${db.url ? 'external (DATABASE_URL)' : 'embedded PGlite'}; ${navigator.hardwareConcurrency} cores\n`)

    delete process.env.NATS_URL
    delete process.env.REDIS_URL
    const nodeEnv = (port: number): Record<string, string> => ({
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_TOKEN,
      SECRET_KEY,
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info', // the access log is part of the stack
      DEMO_ACCOUNT: 'false',
      DATA_DIR: mkdtempSync(join(dataDir, 'node-')),
      ...(db.url ? { DATABASE_URL: db.url } : {}),
    })
    const startProcess = async (args: string[], port: number, extra: Record<string, string> = {}) => {
      // stdout (the access log) to a file, as deployed
      const child = spawn(['bun', ...args], { env: env({ ...nodeEnv(port), ...extra }), stdout: Bun.file(join(dataDir, `stdout-${port}.log`)), stderr: 'inherit' })
      children.push(child)
      await waitFor(`http://127.0.0.1:${port}/healthz`)
      return { url: `http://127.0.0.1:${port}`, pid: child.pid }
    }

    // The full stack: a real node process, as `bun run start` runs it (access log to a file).
    const node = await startProcess([join(ROOT, 'src/main.ts')], await freePort())
    const bench = await prepareBenchKey(node.url)
    // Baseline (b): the same node code with its hot key state taken out, so each validate reads the
    // key (and its devices) with one Postgres query; everything else (auth, quota, logs) is the same.
    const perQueryNode = await startProcess([import.meta.path, 'node-per-query'], await freePort())
    const perQuery = await prepareBenchKey(perQueryNode.url)
    // A minimal server of this file's roles (validate-roles.ts), on its own port, told the bench key.
    const startRole = async (role: string) => {
      const port = await freePort()
      return startProcess([import.meta.path, role], port, { BENCH_PORT: String(port), BENCH_KEY: bench.keyValue, BENCH_FP: bench.fingerprint, BENCH_ANSWER: bench.answer })
    }
    // Baseline (a): minimal Bun.serve, same JSON body, answer from a Map.
    const mapServer = await startRole('map')
    // Reference (a′): (a) that also reads Authorization and sends X-Request-Id, as every answer must.
    const contractServer = await startRole('map-contract')
    // The strict minimal endpoint (no hashing, the key string looked up as sent): the issue-26 baseline.
    const strictServer = await startRole('strict')
    // Reference (s′): (s) with the two CORS headers the contract puts on every client-route answer.
    const strictCorsServer = await startRole('strict-cors')
    // For reference: a minimal Bun.serve doing the check as one query (no auth cache, quota or logs).
    const rawPort = await freePort()
    const rawServer = await startProcess([import.meta.path, 'pg'], rawPort, {
      BENCH_PORT: String(rawPort),
      BENCH_DB: db.url ?? '',
      BENCH_TOKEN: bench.token,
      BENCH_KEY: bench.keyValue,
      BENCH_FP: bench.fingerprint,
      BENCH_KEY_HASH: hashKeyValue(normalizeKeyValue(bench.keyValue)!),
    })

    // The Keyward Relay (docs/integrating.md, "Floating seats on your customer's network"): the same key
    // value and device, the device holding a lease (its validate renews it), no Authorization needed.
    const relay = await startBenchRelay(dataDir, bench.keyValue, bench.body)
    children.push(relay.proc)

    const servers = [
      { name: '(a) Bun.serve + JSON + Map', url: `${mapServer.url}/v1/validate`, pid: mapServer.pid, auth: bench },
      { name: 'Keyward full stack (POST /v1/validate)', url: `${node.url}/v1/validate`, pid: node.pid, auth: bench },
      { name: '(b) same stack, one Postgres query per call', url: `${perQueryNode.url}/v1/validate`, pid: perQueryNode.pid, auth: perQuery },
      { name: '(s) strict minimal endpoint', url: `${strictServer.url}/v1/validate`, pid: strictServer.pid, auth: bench },
      { name: '    full stack via the Elysia route', url: `${node.url}/v1/validate/`, pid: node.pid, auth: bench },
      { name: '    bare Bun.serve + one query (reference)', url: `${rawServer.url}/v1/validate`, pid: rawServer.pid, auth: bench },
      { name: '    (a′) = (a) + reads Authorization, sends X-Request-Id', url: `${contractServer.url}/v1/validate`, pid: contractServer.pid, auth: bench },
      { name: '    (s′) = (s) + the contract\'s CORS headers on the answer', url: `${strictCorsServer.url}/v1/validate`, pid: strictCorsServer.pid, auth: bench },
      { name: '(r) Keyward Relay, known device (lease renewed)', url: `${relay.url}/v1/validate`, pid: relay.pid, auth: bench },
    ]
    const run = useWrk ? wrk : fetchLoad
    for (const s of servers) await run(s.url, s.auth.token, s.auth.body, Math.min(3, SECONDS)) // warm-up: JIT, pools, caches
    const runs: Measured[][] = servers.map(() => [])
    for (let round = 0; round < ROUNDS; round++) {
      const line: string[] = []
      for (const [i, s] of servers.entries()) {
        const m = await measure(s, useWrk)
        runs[i].push(m)
        line.push(m.rps.toFixed(0))
      }
      console.log(`round ${round + 1}/${ROUNDS}: ${line.join(' | ')} req/s`)
    }
    console.log('')
    const [a, full, b, strict, , , , strictCors] = servers.map((s, i) => summary(s.name, runs[i]))
    const [aRuns, fullRuns, bRuns, strictRuns, elysiaRuns, rawRuns, contractRuns, strictCorsRuns, relayRuns] = runs
    console.log('')
    ratio('full stack / (s) strict minimal', fullRuns, strictRuns, '(target >= 0.90x)')
    const p99s = fullRuns.map((m, i) => m.p99 / strictRuns[i].p99)
    console.log(`p99 full stack / p99 (s) = ${median(p99s).toFixed(2)}x   (rounds ${Math.min(...p99s).toFixed(2)}–${Math.max(...p99s).toFixed(2)})   (target <= 1.25x)`)
    ratio('(s′) / (s)', strictCorsRuns, strictRuns, '(what the two CORS headers every client-route answer carries cost in Bun)')
    ratio('full stack / (s′) strict + CORS headers', fullRuns, strictCorsRuns, '')
    const p99sCors = fullRuns.map((m, i) => m.p99 / strictCorsRuns[i].p99)
    console.log(`p99 full stack / p99 (s′) = ${median(p99sCors).toFixed(2)}x   (rounds ${Math.min(...p99sCors).toFixed(2)}–${Math.max(...p99sCors).toFixed(2)})`)
    ratio('full stack / (a)', fullRuns, aRuns, '(target >= 0.85x)')
    ratio('full stack / (b)', fullRuns, bRuns, '(target >= 4x)')
    ratio('(a) / (b)', aRuns, bRuns, '(the most any stack in front of the Map could reach against (b))')
    ratio('full stack / bare Bun.serve + one query', fullRuns, rawRuns, '')
    ratio('(a′) / (a)', contractRuns, aRuns, '(what reading one request header and sending one response header cost in Bun)')
    ratio('full stack / (a′)', fullRuns, contractRuns, '')
    ratio('Elysia route / (a)', elysiaRuns, aRuns, '(why the hot route bypasses the framework)')
    ratio('(r) relay / full stack', relayRuns, fullRuns, '(target >= 0.80x: a relay validate of a known device vs a node\'s)')
    if (a.cpuUs && full.cpuUs) {
      console.log(`server CPU per request (medians): (a) ${a.cpuUs.toFixed(1)} µs, full stack ${full.cpuUs.toFixed(1)} µs, ` +
        `(b) ${b.cpuUs?.toFixed(1)} µs (the stack's own work: ${(full.cpuUs - a.cpuUs).toFixed(1)} µs/req over (a))`)
      if (strict?.cpuUs && strictCors?.cpuUs) {
        console.log(`server CPU per request (medians): (s) ${strict.cpuUs.toFixed(1)} µs, (s′) ${strictCors.cpuUs.toFixed(1)} µs, ` +
          `full stack ${full.cpuUs.toFixed(1)} µs (over (s′): ${(full.cpuUs - strictCors.cpuUs).toFixed(1)} µs/req)`)
      }
    }
    for (const c of children) c.kill()
    await Promise.all(children.map((c) => c.exited))
    children.length = 0

    const relayMemory = spawn(['bun', join(import.meta.dir, 'relay.ts'), 'memory', String(Math.min(KEYS, 100_000))], { env: env({}), stdout: 'inherit', stderr: 'inherit' })
    children.push(relayMemory)
    await relayMemory.exited

    // Memory: a fresh node process filled with KEYS keys (one active device each).
    console.log(`\nResident memory of a node holding ${KEYS.toLocaleString('en')} keys in its hot state:`)
    const mem = spawn(['bun', import.meta.path, 'memory'], {
      env: env({ BENCH_DB: db.url ?? '', BENCH_KEYS: String(KEYS), SECRET_KEY, ADMIN_TOKEN, DATA_DIR: dataDir }),
      stdout: 'inherit',
      stderr: 'inherit',
    })
    children.push(mem)
    await mem.exited
  } finally {
    for (const c of children) c.kill()
    await Promise.all(children.map((c) => c.exited))
    rmSync(dataDir, { recursive: true, force: true })
    await db.drop()
  }
}


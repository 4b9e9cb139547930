// `bun test/bench/signed-validate.ts`: throughput of signed POST /v1/validate (Keyward-Nonce → one
// Ed25519 signature per answer, docs/api.md, "Signed answers") against unsigned validate, on the same node process, in the
// same run: interleaved rounds, medians, and the median of the per-round ratios (target >= 0.6x).
// Prints figures; asserts nothing.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun test/bench/signed-validate.ts
//   BENCH_ROUNDS=5 BENCH_SECONDS=5 BENCH_CONNECTIONS=50
//
// Load by wrk (apt-get install -y wrk); every request of a signed run carries the same nonce (the
// server keeps no nonce state, so this costs what a fresh nonce per request costs).
import { spawn, spawnSync } from 'bun'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDatabaseOn } from '../support/harness'
import { prepareBenchKey } from './fixture'
import { median } from './stats'
import { freePort, startBenchNode, waitFor } from './servers'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const SECRET_KEY = 'ab'.repeat(32)
const NONCE = 'bench-nonce-0123456789abcdef_XYZ'

function wrk(url: string, token: string, body: string, seconds: number, nonce: string | null): { rps: number; errors: number } {
  const dir = mkdtempSync(join(tmpdir(), 'keyward-bench-'))
  const script = join(dir, 'post.lua')
  writeFileSync(
    script,
    `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\n` +
      `wrk.headers["Authorization"] = "Bearer ${token}"\n` +
      (nonce === null ? '' : `wrk.headers["Keyward-Nonce"] = "${nonce}"\n`),
  )
  const out = spawnSync(['wrk', '-t2', `-c${CONNECTIONS}`, `-d${seconds}s`, '-s', script, url]).stdout.toString()
  rmSync(dir, { recursive: true, force: true })
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN),
    errors: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0),
  }
}

const db = process.env.DATABASE_URL ? await createDatabaseOn(process.env.DATABASE_URL, 'keyward_bench') : null
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-bench-signed-'))
const children: ReturnType<typeof spawn>[] = []
try {
  console.log(`Signed vs unsigned POST /v1/validate: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s each, load by wrk`)
  console.log(`Postgres: ${db ? 'external (DATABASE_URL)' : 'embedded PGlite'}; ${navigator.hardwareConcurrency} cores\n`)
  // A real node process, as `bun run start` runs it (access log to /dev/null).
  const { url, proc } = await startBenchNode({ dataDir: mkdtempSync(join(dataDir, 'node-')), dbUrl: db?.url, secretKey: SECRET_KEY, logLevel: 'info' })
  children.push(proc)
  const bench = await prepareBenchKey(url)
  // One signed call first: checks it is signed, and loads the account's key like any first signed call.
  const first = await fetch(`${url}/v1/validate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bench.token}`, 'content-type': 'application/json', 'keyward-nonce': NONCE },
    body: bench.body,
  })
  if (first.status !== 200 || !first.headers.get('keyward-signature')) throw new Error(`signed validate failed: ${first.status}`)

  // The ceiling: a bare Bun.serve answering from a Map (reference (a′) of validate.ts), unsigned and
  // with one signature made by the node's own signing function. No implementation keeps more of its
  // unsigned throughput than this pair does; how close Keyward's ratio comes to it is what its own
  // signed path costs beyond the signature.
  const mapPort = await freePort()
  children.push(
    spawn(['bun', join(import.meta.dir, 'validate.ts'), 'map-signed'], {
      env: { ...process.env, BENCH_PORT: String(mapPort), BENCH_KEY: bench.keyValue, BENCH_FP: bench.fingerprint },
      stdout: 'ignore',
      stderr: 'inherit',
    }),
  )
  await waitFor(`http://127.0.0.1:${mapPort}/healthz`)
  const bare = `http://127.0.0.1:${mapPort}/v1/validate`

  const target = `${url}/v1/validate`
  for (const t of [target, bare]) for (const nonce of [null, NONCE]) wrk(t, bench.token, bench.body, Math.min(3, SECONDS), nonce) // warm-up
  const runs = { unsigned: [] as number[], signed: [] as number[], bareUnsigned: [] as number[], bareSigned: [] as number[] }
  let errors = 0
  for (let round = 0; round < ROUNDS; round++) {
    const u = wrk(target, bench.token, bench.body, SECONDS, null)
    const s = wrk(target, bench.token, bench.body, SECONDS, NONCE)
    const bu = wrk(bare, bench.token, bench.body, SECONDS, null)
    const bs = wrk(bare, bench.token, bench.body, SECONDS, NONCE)
    runs.unsigned.push(u.rps)
    runs.signed.push(s.rps)
    runs.bareUnsigned.push(bu.rps)
    runs.bareSigned.push(bs.rps)
    errors += u.errors + s.errors + bu.errors + bs.errors
    console.log(`round ${round + 1}/${ROUNDS}: unsigned ${u.rps.toFixed(0)} | signed ${s.rps.toFixed(0)} | bare ${bu.rps.toFixed(0)} | bare signed ${bs.rps.toFixed(0)} req/s`)
  }
  const ratio = (a: number[], b: number[]) => a.map((x, i) => x / b[i]!)
  const ratios = ratio(runs.signed, runs.unsigned)
  const ceiling = ratio(runs.bareSigned, runs.bareUnsigned)
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`
  const rounds = (xs: number[]) => `(rounds ${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`
  console.log('')
  console.log(`unsigned validate      ${median(runs.unsigned).toFixed(0).padStart(7)} req/s (${range(runs.unsigned)})`)
  console.log(`signed validate        ${median(runs.signed).toFixed(0).padStart(7)} req/s (${range(runs.signed)})`)
  console.log(`bare Bun.serve + Map   ${median(runs.bareUnsigned).toFixed(0).padStart(7)} req/s (${range(runs.bareUnsigned)})`)
  console.log(`  the same + one signature ${median(runs.bareSigned).toFixed(0).padStart(7)} req/s (${range(runs.bareSigned)})`)
  console.log(`signed / unsigned = ${median(ratios).toFixed(2)}x   ${rounds(ratios)}   (target >= 0.6x)${errors ? `   (${errors} non-2xx!)` : ''}`)
  console.log(`ceiling: bare signed / bare unsigned = ${median(ceiling).toFixed(2)}x   ${rounds(ceiling)}   (what one signature leaves of any server's throughput here)`)
  console.log(`Keyward's ratio / the ceiling = ${median(ratio(ratios, ceiling)).toFixed(2)}   (1.00: the signed path adds nothing but the signature)`)
} finally {
  for (const c of children) c.kill()
  await Promise.all(children.map((c) => c.exited))
  rmSync(dataDir, { recursive: true, force: true })
  await db?.drop()
}

// Benchmark: verified validate calls per second through @keyward/client against a real local Keyward
// node, beside plain fetch of the same route (unsigned, and signed but not verified), and the client's
// own CPU per call. The node runs in its own process (`bun src/main.ts`, embedded PGlite, or the
// Postgres of DATABASE_URL), so the CPU figures are this process's: the client's alone.
// A program, not a test: run it on a quiet machine.
//
//   bun test/bench/sdk.ts [calls] [concurrency]
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun test/bench/sdk.ts
//   BENCH_ROUNDS=5 bun test/bench/sdk.ts 5000 8
//
// Each round measures the three clients one after another; every figure printed is the median over
// the rounds. "SDK's own CPU" is the client's CPU per call minus that of plain fetch of the same
// signed request: the nonce, the signature check, the JSON and the grace bookkeeping.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDatabaseOn } from '../support/harness'
import { prepareBenchKey } from './fixture'
import { median } from './stats'
import { startBenchNode } from './servers'
import { Keyward, memoryStorage } from '../../client/src/index.ts'

const CALLS = Number(process.argv[2] ?? 5000)
const CONCURRENCY = Number(process.argv[3] ?? 8)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SECRET_KEY = 'cd'.repeat(32)

/** CALLS calls, CONCURRENCY at a time: calls per second and this process's CPU (user + system) per call. */
async function measure(call: () => Promise<unknown>) {
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < CALLS) await call()
    }),
  )
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  return { rate: CALLS / seconds, cpuUs: (cpu.user + cpu.system) / CALLS }
}

const db = process.env.DATABASE_URL ? await createDatabaseOn(process.env.DATABASE_URL, 'keyward_bench') : null
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-bench-sdk-'))
const { url, proc: node } = await startBenchNode({ dataDir, dbUrl: db?.url, secretKey: SECRET_KEY, logLevel: 'warn' })
try {
  const bench = await prepareBenchKey(url)
  const publicKey = ((await (await fetch(`${url}/v1/offline/public-key`, { headers: { authorization: `Bearer ${bench.token}` } })).json()) as any).public_key
  const headers = { authorization: `Bearer ${bench.token}`, 'content-type': 'application/json' }

  const clients: Record<string, () => Promise<unknown>> = {
    'plain fetch (unsigned, no checks)': async () => {
      const res = await fetch(`${url}/v1/validate`, { method: 'POST', headers, body: bench.body })
      if ((await res.json()).valid !== true) throw new Error('unexpected answer')
    },
    'plain fetch (signed, not verified)': async () => {
      const nonce = crypto.randomUUID().replace(/-/g, '')
      const res = await fetch(`${url}/v1/validate`, { method: 'POST', headers: { ...headers, 'keyward-nonce': nonce }, body: bench.body })
      if ((await res.json()).valid !== true || !res.headers.get('keyward-signature')) throw new Error('unexpected answer')
    },
    'Keyward.validate (signed, verified)': (() => {
      const kw = new Keyward({ baseUrl: url, token: bench.token, publicKey, fingerprint: bench.fingerprint, storage: memoryStorage(), retries: 0 })
      return async () => {
        const r = await kw.validate({ key: bench.keyValue, appVersion: '1.0.0' })
        if (!r.valid || r.offline) throw new Error('unexpected answer')
      }
    })(),
  }
  const names = Object.keys(clients)
  for (const name of names) for (let i = 0; i < 300; i++) await clients[name]!() // warm-up (and the node's signing key loaded)

  const results = new Map(names.map((n) => [n, { rate: [] as number[], cpuUs: [] as number[] }]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of names) {
      const m = await measure(clients[name]!)
      results.get(name)!.rate.push(m.rate)
      results.get(name)!.cpuUs.push(m.cpuUs)
    }
  }

  // One Ed25519 verification alone, as the client does it (WebCrypto), on a real signed answer.
  const nonce = 'bench-verify-0123456789abcdef'
  const res = await fetch(`${url}/v1/validate`, { method: 'POST', headers: { ...headers, 'keyward-nonce': nonce }, body: bench.body })
  const body = new Uint8Array(await res.arrayBuffer())
  const [, kid, t, sig] = /kid=([0-9a-f]+), t=(\d+), sig=(\S+)$/.exec(res.headers.get('keyward-signature')!)!
  const requestSha256 = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(bench.body))), (b) => b.toString(16).padStart(2, '0')).join('')
  const message = new Uint8Array([...new TextEncoder().encode(`keyward-answer/v3\n${kid}\n/v1/validate\n${nonce}\n${t}\n${requestSha256}\n`), ...body])
  const key = await crypto.subtle.importKey('raw', Uint8Array.from(atob(publicKey), (c) => c.charCodeAt(0)), { name: 'Ed25519' }, false, ['verify'])
  const signature = Uint8Array.from(atob(sig!), (c) => c.charCodeAt(0))
  const N = 5000
  const v0 = process.cpuUsage()
  for (let i = 0; i < N; i++) if (!(await crypto.subtle.verify({ name: 'Ed25519' }, key, signature, message))) throw new Error('bad signature')
  const v = process.cpuUsage(v0)
  const verifyUs = (v.user + v.system) / N

  console.log(`Validate through the client against a local node (${db ? 'Postgres of DATABASE_URL' : 'embedded PGlite'}, its own process)`)
  console.log(`${CALLS} calls per run, concurrency ${CONCURRENCY}, median of ${ROUNDS} rounds, ${process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`}, ${navigator.hardwareConcurrency} cores\n`)
  const row = (name: string) => {
    const r = results.get(name)!
    return { rate: median(r.rate), cpuUs: median(r.cpuUs) }
  }
  for (const name of names) {
    const r = row(name)
    console.log(`${name.padEnd(36)} ${r.rate.toFixed(0).padStart(7)} calls/s   client CPU ${r.cpuUs.toFixed(0).padStart(4)} µs/call`)
  }
  const [unsigned, signed, sdk] = names.map(row) as [ReturnType<typeof row>, ReturnType<typeof row>, ReturnType<typeof row>]
  console.log(`one Ed25519 verify (WebCrypto, CPU)   ${verifyUs.toFixed(0).padStart(4)} µs`)
  console.log(`SDK / plain signed fetch throughput: ${(sdk.rate / signed.rate).toFixed(2)}×  (SDK / plain unsigned: ${(sdk.rate / unsigned.rate).toFixed(2)}×)`)
  console.log(`SDK's own CPU per call (SDK − plain signed fetch): ${(sdk.cpuUs - signed.cpuUs).toFixed(0)} µs`)
} finally {
  node.kill()
  await node.exited
  rmSync(dataDir, { recursive: true, force: true })
  await db?.drop()
}

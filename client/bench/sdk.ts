// Benchmark: verified validate calls per second through @keyward/client against a local signing
// server (a separate process), beside plain fetch of the same route, and the client's own CPU per
// call. Run: bun client/bench/sdk.ts [calls] [concurrency]   (a program, not a test: run it on a quiet machine)
import { Keyward, memoryStorage } from '../src/index.ts'

const CALLS = Number(process.argv[2] ?? 5000)
const CONCURRENCY = Number(process.argv[3] ?? 8)
const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
const FP = 'a'.repeat(64)

const server = Bun.spawn(['bun', `${import.meta.dir}/server.ts`], { stdout: 'pipe', stderr: 'inherit' })
const reader = server.stdout.getReader()
let first = ''
while (!first.includes('\n')) first += new TextDecoder().decode((await reader.read()).value)
const { url, publicKey } = JSON.parse(first.split('\n')[0])

async function run(label: string, call: () => Promise<unknown>) {
  for (let i = 0; i < 200; i++) await call() // warm-up
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
  const cpuUs = (cpu.user + cpu.system) / CALLS
  console.log(`${label.padEnd(34)} ${(CALLS / seconds).toFixed(0).padStart(7)} calls/s   client CPU ${cpuUs.toFixed(0).padStart(4)} µs/call`)
  return { rate: CALLS / seconds, cpuUs }
}

const body = JSON.stringify({ key: KEY, device_fingerprint: FP })
const plain = await run('plain fetch (unsigned, no checks)', async () => {
  const res = await fetch(`${url}/v1/validate`, { method: 'POST', headers: { authorization: 'Bearer kw_test', 'content-type': 'application/json' }, body })
  const json = await res.json()
  if (!json.valid) throw new Error('unexpected answer')
})
const kw = new Keyward({ baseUrl: url, token: 'kw_test', publicKey, fingerprint: FP, storage: memoryStorage() })
const sdk = await run('Keyward.validate (signed, verified)', async () => {
  const r = await kw.validate({ key: KEY })
  if (!r.valid || r.offline) throw new Error('unexpected answer')
})

// One Ed25519 verification alone, as the SDK does it (WebCrypto).
const key = await crypto.subtle.importKey('raw', Uint8Array.from(atob(publicKey), (c) => c.charCodeAt(0)), { name: 'Ed25519' }, false, ['verify'])
const msg = new Uint8Array(200)
const sig = new Uint8Array(64)
const N = 5000
const v0 = performance.now()
for (let i = 0; i < N; i++) await crypto.subtle.verify({ name: 'Ed25519' }, key, sig, msg)
const verifyUs = ((performance.now() - v0) * 1000) / N

console.log(`one Ed25519 verify (WebCrypto)      ${verifyUs.toFixed(0).padStart(4)} µs`)
console.log(`SDK / plain throughput: ${(sdk.rate / plain.rate).toFixed(2)}×; SDK's extra CPU per call: ${(sdk.cpuUs - plain.cpuUs).toFixed(0)} µs`)
console.log(`(${CALLS} calls each, concurrency ${CONCURRENCY}, ${process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`})`)
server.kill()

// `bun run bench:past-cache`: what validate costs when the keys asked about do not fit the hot state
// (CACHE_MAX_KEYS). A node runs in this process with a small bound (BENCH_CACHE keys, default 2,000),
// over BENCH_KEYS keys in Postgres (default 50,000, one device each). Its POST /v1/validate handler
// is called directly (no network), by BENCH_CONCURRENCY callers at once, on two working sets, in
// alternating slices of BENCH_SECONDS:
//   all hot      random keys among BENCH_CACHE / 2 of them: after the first pass, every answer from memory
//   past cache   random keys among all BENCH_KEYS: nearly every call a miss, so one Postgres query
//                (read-through, then stored and something evicted)
// Printed: calls per second of each and the latency of a call (medians over the slices), their ratio
// within each round, and the share of misses. A miss costs the query's round trip, and Postgres
// shares the 2 cores with the node.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun run bench:past-cache
import { randomBytes } from 'node:crypto'
import { hashKeyValue, keyPrefixOf, newId, newKeyValue, normalizeKeyValue } from '../../src/infra/crypto'
import { cacheLookupResults } from '../../src/infra/metrics'
import { Signers } from '../../src/modules/signing/signers'
import { fastValidate } from '../../src/modules/validation/fast-path'
import { ADMIN_TOKEN } from './fixture'
import { median } from './stats'
import { startInProcessNode } from './servers'

const KEYS = Number(process.env.BENCH_KEYS ?? 50_000)
const CACHE = Number(process.env.BENCH_CACHE ?? 2_000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)

if (!process.env.DATABASE_URL) throw new Error('set DATABASE_URL (a real Postgres: the misses are its queries)')
const { node, stop } = await startInProcessNode('past-cache', { CACHE_MAX_KEYS: String(CACHE) })
try {
  const call = async (path: string, token: string, body: unknown) =>
    (await fetch(node.url + path, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json() as Promise<any>
  const acct = await call('/admin/accounts', ADMIN_TOKEN, { name: 'Bench', plan: 'enterprise' })
  const token: string = acct.api_key.token
  const product = await call('/v1/products', token, { name: 'Bench', slug: 'bench' })
  const accountId: string = acct.account.id
  const { sql } = node.deps
  // KEYS keys with one active device each, written straight into Postgres (the API would take minutes).
  const bodies: string[] = []
  for (let start = 0; start < KEYS; start += 5_000) {
    const keys = []
    const activations = []
    for (let i = start; i < Math.min(KEYS, start + 5_000); i++) {
      const value = newKeyValue()
      const id = newId('key')
      const fp = randomBytes(32).toString('hex')
      keys.push({ id, account_id: accountId, product_id: product.id, key_hash: hashKeyValue(normalizeKeyValue(value)!), key_prefix: keyPrefixOf(value), activation_limit: 3 })
      activations.push({ id: newId('act'), account_id: accountId, key_id: id, product_id: product.id, device_fingerprint: fp })
      bodies.push(JSON.stringify({ key: value, device_fingerprint: fp }))
    }
    await sql`insert into license_keys ${sql(keys)}`
    await sql`insert into activations ${sql(activations)}`
  }
  const handle = fastValidate(node.deps, node.deps.validation, new Signers(sql, node.deps.secretKey))
  const headers = { host: '127.0.0.1', 'content-type': 'application/json', authorization: `Bearer ${token}` }
  const hotSet = bodies.slice(0, Math.floor(CACHE / 2))

  /** Calls per second over `set` for SECONDS, and the share of lookups that missed. */
  async function slice(set: string[]): Promise<{ rps: number; missShare: number; p50: number; p99: number }> {
    const { hit, miss } = cacheLookupResults // plain counts until /metrics folds them (nobody scrapes here)
    const misses0 = miss.n
    const hits0 = hit.n
    let calls = 0
    const ms: number[] = []
    const until = performance.now() + SECONDS * 1000
    const t0 = performance.now()
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        const body = set[Math.floor(Math.random() * set.length)]
        const t = performance.now()
        const res = await handle(new Request('http://127.0.0.1/v1/validate', { method: 'POST', headers: { ...headers, 'content-length': String(body.length) }, body }))
        const answer = (await res.json()) as { valid: boolean }
        if (!answer.valid) throw new Error(`not valid: ${JSON.stringify(answer)}`)
        ms.push(performance.now() - t)
        calls++
      }
    }))
    const seconds = (performance.now() - t0) / 1000
    const misses = miss.n - misses0
    const hits = hit.n - hits0
    ms.sort((x, y) => x - y)
    return { rps: calls / seconds, missShare: misses / Math.max(1, misses + hits), p50: ms[Math.floor(ms.length / 2)], p99: ms[Math.floor(ms.length * 0.99)] }
  }

  await slice(hotSet) // warm-up: the hot set is loaded, the JIT settles
  type Slice = Awaited<ReturnType<typeof slice>>
  const hotSlices: Slice[] = []
  const pastSlices: Slice[] = []
  for (let round = 0; round < ROUNDS; round++) {
    hotSlices.push(await slice(hotSet))
    pastSlices.push(await slice(bodies))
  }
  const hot = hotSlices.map((x) => x.rps)
  const past = pastSlices.map((x) => x.rps)
  const missShares = pastSlices.map((x) => x.missShare)
  const latency = (xs: Slice[]) => `latency p50 ${median(xs.map((x) => x.p50)).toFixed(2)} ms, p99 ${median(xs.map((x) => x.p99)).toFixed(2)} ms`
  console.log(`validate handler in process, ${CONCURRENCY} callers, CACHE_MAX_KEYS=${CACHE.toLocaleString('en')}, ${KEYS.toLocaleString('en')} keys in Postgres, ${ROUNDS} rounds × ${SECONDS} s (medians):`)
  console.log(`  all hot     (${hotSet.length.toLocaleString('en')} keys)  ${Math.round(median(hot)).toLocaleString('en').padStart(8)} calls/s   ${latency(hotSlices)}`)
  console.log(`  past cache  (${KEYS.toLocaleString('en')} keys)  ${Math.round(median(past)).toLocaleString('en').padStart(8)} calls/s   ${latency(pastSlices)}; misses ${(median(missShares) * 100).toFixed(0)}% of lookups`)
  console.log(`  past cache / all hot: ${median(past.map((p, i) => p / hot[i])).toFixed(2)}x`)
} finally {
  await stop()
}

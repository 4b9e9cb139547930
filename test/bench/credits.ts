// `bun run bench:credits`: metered validate (one hot key spending 1 credit per call from its lease)
// against unmetered validate of a key of the same account, on one node and on three nodes (wrk on each
// node at once), printed as ratios measured in the same run. Needs the local Postgres, NATS and Redis
// (cluster mode). A program, not a test: it prints figures and asserts nothing about time.
//
//   bun run bench:credits [rounds=3] [seconds=4]
//
// BENCH_BEFORE_ROOT=<checkout> (e.g. a `git worktree` of an older commit, with its `bun install`) runs
// that checkout's nodes too, each on its own database, in alternating rounds with this one's, and
// prints after/before for both kinds: a change's cost measured in one run.
import { benchAccount, requireServices } from './fixture'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ADMIN_TOKEN, client, freshDatabase, newKey, newProduct } from '../support/harness'
import { fingerprint, startNodeProcess, type NodeProcess } from '../support/cluster'
import { median } from './stats'

requireServices('bun run bench:credits', ['DATABASE_URL', 'NATS_URL', 'REDIS_URL'])
if (Bun.spawnSync(['sh', '-c', 'command -v wrk']).exitCode !== 0) {
  console.error('bench:credits needs wrk (apt-get install -y wrk)')
  process.exit(1)
}

const ROUNDS = Number(process.argv[2] ?? 3)
const SECONDS = Number(process.argv[3] ?? 4)
const CONNECTIONS = 48

/** Runs wrk against every url at once (CONNECTIONS split between them); total req/s, answers, non-2xx count. */
async function load(urls: string[], token: string, body: string): Promise<{ rps: number; answers: number; errors: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'kw-bench-credits-'))
  const script = join(dir, 'validate.lua')
  writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\nwrk.headers["Authorization"] = "Bearer ${token}"\n`)
  const each = Math.max(1, Math.floor(CONNECTIONS / urls.length))
  const procs = urls.map((url) => Bun.spawn(['wrk', '-t1', `-c${each}`, `-d${SECONDS}s`, '-s', script, `${url}/v1/validate`], { stdout: 'pipe' }))
  const outs = await Promise.all(procs.map(async (p) => new Response(p.stdout).text()))
  rmSync(dir, { recursive: true, force: true })
  let rps = 0
  let answers = 0
  let errors = 0
  for (const out of outs) {
    rps += Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0)
    answers += Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
    errors += Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
  }
  return { rps, answers, errors }
}

interface Variant {
  name: string
  db: Awaited<ReturnType<typeof freshDatabase>>
  nodes: NodeProcess[]
  token: string
  meteredId: string
  admin: ReturnType<typeof client>
  bodies: Record<'unmetered' | 'metered', string>
  spent: number
}

/** Three nodes of `root` (this checkout when undefined) on a fresh database, with an account, a plain and a metered key. */
async function setUp(name: string, root: string | undefined): Promise<Variant> {
  const db = await freshDatabase()
  const nodes: NodeProcess[] = []
  const v: Variant = { name, db, nodes, token: '', meteredId: '', admin: null as never, bodies: { unmetered: '', metered: '' }, spent: 0 }
  for (let i = 0; i < 3; i++) nodes.push(await startNodeProcess(db.url!, { env: { LOG_LEVEL: 'error' }, root }))
  await Bun.sleep(700)
  v.admin = client(nodes[0]!.url)
  v.token = (await benchAccount(v.admin)).token
  const product = await newProduct(v.admin, v.token)
  const device = fingerprint(1, 'be0c4')
  const plain = await newKey(v.admin, v.token, product.id)
  const metered = await newKey(v.admin, v.token, product.id, { credits: { remaining: 1_000_000_000_000 } })
  v.meteredId = metered.id
  v.bodies = {
    unmetered: JSON.stringify({ key: plain.key_value, device_fingerprint: device }),
    metered: JSON.stringify({ key: metered.key_value, device_fingerprint: device }),
  }
  for (const node of nodes) {
    for (const body of Object.values(v.bodies)) {
      const res = await node.call('POST', '/v1/validate', { token: v.token, body: JSON.parse(body) })
      if (res.body.valid !== true) throw new Error(`bench key does not validate (${name}): ${JSON.stringify(res.body)}`)
    }
  }
  return v
}

const remaining = async (v: Variant) => (await v.admin('GET', `/v1/keys/${v.meteredId}`, { token: v.token })).body.credits.remaining as number

const variants: Variant[] = []
try {
  if (process.env.BENCH_BEFORE_ROOT) variants.push(await setUp('before', process.env.BENCH_BEFORE_ROOT))
  variants.push(await setUp(variants.length ? 'after' : 'this checkout', undefined))
  const before = await Promise.all(variants.map(remaining))
  console.log(`metered vs unmetered validate, ${ROUNDS} rounds of ${SECONDS} s, wrk ${CONNECTIONS} connections in all; ${navigator.hardwareConcurrency} cores` +
    (variants.length > 1 ? `; before = ${process.env.BENCH_BEFORE_ROOT}` : ''))
  for (const set of [{ name: '1 node', count: 1 }, { name: '3 nodes', count: 3 }]) {
    const ratios = new Map(variants.map((v) => [v, [] as number[]]))
    const figures = new Map(variants.map((v) => [v, { unmetered: [] as number[], metered: [] as number[] }]))
    for (let round = 0; round < ROUNDS; round++) {
      // alternate the orders, so a burst of load from elsewhere hits every variant and kind alike
      const order = round % 2 ? [...variants].reverse() : variants
      for (const v of order) {
        const kinds = round % 2 ? (['metered', 'unmetered'] as const) : (['unmetered', 'metered'] as const)
        const r: Record<string, number> = {}
        for (const kind of kinds) {
          const { rps, answers, errors } = await load(v.nodes.slice(0, set.count).map((n) => n.url), v.token, v.bodies[kind])
          if (errors) console.log(`  (warning: ${errors} non-2xx answers, ${v.name} ${kind})`)
          if (kind === 'metered') v.spent += answers
          r[kind] = rps
          figures.get(v)![kind].push(rps)
        }
        ratios.get(v)!.push(r.metered! / r.unmetered!)
      }
    }
    for (const v of variants) {
      const f = figures.get(v)!
      const rs = ratios.get(v)!
      console.log(`${set.name}, ${v.name}: unmetered ${median(f.unmetered).toFixed(0)} req/s, metered ${median(f.metered).toFixed(0)} req/s; ` +
        `metered / unmetered = ${median(rs).toFixed(2)}x (rounds ${Math.min(...rs).toFixed(2)}–${Math.max(...rs).toFixed(2)})   target ≥ 0.5x`)
    }
    if (variants.length === 2) {
      const [b, a] = [figures.get(variants[0]!)!, figures.get(variants[1]!)!]
      const paired = (kind: 'unmetered' | 'metered') => median(a[kind].map((x, i) => x / b[kind][i]!))
      console.log(`${set.name}, after / before (paired rounds): unmetered ${paired('unmetered').toFixed(2)}x, metered ${paired('metered').toFixed(2)}x` +
        `; metered/unmetered after ÷ before = ${(median(ratios.get(variants[1]!)!) / median(ratios.get(variants[0]!)!)).toFixed(2)}x   target ≥ 0.95x`)
    }
  }
  await Bun.sleep(2500) // every node's lease report written
  for (const [i, v] of variants.entries()) {
    // wrk stops with requests in flight: the node answered (and spent for) a few it never read
    console.log(`${v.name}: credits spent per GET /v1/keys/:id: ${before[i]! - (await remaining(v))}; valid answers wrk read: ${v.spent}`)
  }
} finally {
  for (const v of variants) {
    await Promise.all(v.nodes.map((n) => n.stop()))
    await v.db.drop()
  }
}

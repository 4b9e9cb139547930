// `bun run bench:credits`: metered validate (one hot key spending 1 credit per call from its lease)
// against unmetered validate of a key of the same account, on one node and on three nodes (wrk on each
// node at once), printed as ratios measured in the same run. Needs the local Postgres, NATS and Redis
// (cluster mode). A program, not a test: it prints figures and asserts nothing about time.
//
//   bun run bench:credits [rounds=3] [seconds=4]
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

const db = await freshDatabase()
const nodes: NodeProcess[] = []
try {
  for (let i = 0; i < 3; i++) nodes.push(await startNodeProcess(db.url!, { env: { LOG_LEVEL: 'error' } }))
  await Bun.sleep(700)
  const admin = client(nodes[0]!.url)
  const { token } = await benchAccount(admin)
  const product = await newProduct(admin, token)
  const device = fingerprint(1, 'be0c4')
  const plain = await newKey(admin, token, product.id)
  const metered = await newKey(admin, token, product.id, { credits: { remaining: 1_000_000_000_000 } })
  const bodies = {
    unmetered: JSON.stringify({ key: plain.key_value, device_fingerprint: device }),
    metered: JSON.stringify({ key: metered.key_value, device_fingerprint: device }),
  }
  for (const node of nodes) {
    for (const body of Object.values(bodies)) {
      const res = await node.call('POST', '/v1/validate', { token, body: JSON.parse(body) })
      if (res.body.valid !== true) throw new Error(`bench key does not validate: ${JSON.stringify(res.body)}`)
    }
  }
  const before = (await admin('GET', `/v1/keys/${metered.id}`, { token })).body.credits.remaining as number
  let spent = 0
  console.log(`metered vs unmetered validate, ${ROUNDS} rounds of ${SECONDS} s, wrk ${CONNECTIONS} connections in all; ${navigator.hardwareConcurrency} cores`)
  for (const set of [{ name: '1 node', urls: [nodes[0]!.url] }, { name: '3 nodes', urls: nodes.map((n) => n.url) }]) {
    const ratios: number[] = []
    const figures: Record<string, number[]> = { unmetered: [], metered: [] }
    for (let round = 0; round < ROUNDS; round++) {
      // alternate the order, so a burst of load from elsewhere hits both alike
      const order = round % 2 ? (['metered', 'unmetered'] as const) : (['unmetered', 'metered'] as const)
      const r: Record<string, number> = {}
      for (const kind of order) {
        const { rps, answers, errors } = await load(set.urls, token, bodies[kind])
        if (errors) console.log(`  (warning: ${errors} non-2xx answers, ${kind})`)
        if (kind === 'metered') spent += answers
        r[kind] = rps
        figures[kind]!.push(rps)
      }
      ratios.push(r.metered! / r.unmetered!)
    }
    console.log(`${set.name}: unmetered ${median(figures.unmetered!).toFixed(0)} req/s, metered ${median(figures.metered!).toFixed(0)} req/s; ` +
      `metered / unmetered = ${median(ratios).toFixed(2)}x (rounds ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})   target ≥ 0.5x`)
  }
  await Bun.sleep(2500) // every node's lease report written
  const after = (await admin('GET', `/v1/keys/${metered.id}`, { token })).body.credits.remaining as number
  // wrk stops with requests in flight: the node answered (and spent for) a few it never read
  console.log(`credits spent per GET /v1/keys/:id: ${before - after}; valid answers wrk read: ${spent}`)
} finally {
  await Promise.all(nodes.map((n) => n.stop()))
  await db.drop()
}

// `bun test/bench/idle-ramp.ts`: load that arrives after a quiet spell. A node on the real Postgres
// idles long enough for its pool to close every connection (idle_timeout), then 64 clients at once
// send calls that need Postgres: unknown keys (a read) and new devices (an activation transaction).
// With Postgres up, every answer must be 2xx; the program counts the others and the slow answers.
// A program, not a test: it prints figures and asserts nothing about time.
//
// Environment (besides DATABASE_URL, NATS_URL, REDIS_URL of the cluster env):
//   IDLE_S=65     seconds of silence before each ramp (the pool's idle_timeout is 60 s)
//   BURST_S=20    seconds of load per ramp
//   ROUNDS=1      idle + ramp, repeated
//   CLIENTS=64    concurrent keep-alive clients (half unknown keys, half new devices)
//   NODES=1       node processes, clients spread over them
//   STALL_MS=1000 an answer slower than this counts as a stall
//   LOAD=bun|wrk  load generator (wrk when installed, else Bun fetch)
import { benchAccount, requireServices } from './fixture'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { ADMIN_TOKEN, freshDatabase, newKey, newProduct } from '../support/harness'
import { startNodeProcess, type NodeProcess } from '../support/cluster'

requireServices('bun test/bench/idle-ramp.ts', ['DATABASE_URL', 'NATS_URL', 'REDIS_URL'])

const num = (name: string, d: number) => Number(process.env[name] ?? d)
const IDLE_S = num('IDLE_S', 65)
const BURST_S = num('BURST_S', 20)
const ROUNDS = num('ROUNDS', 1)
const CLIENTS = num('CLIENTS', 64)
const NODES = num('NODES', 1)
const STALL_MS = num('STALL_MS', 1000)
const hasWrk = Bun.spawnSync(['sh', '-c', 'command -v wrk']).exitCode === 0
const LOAD = process.env.LOAD ?? (hasWrk ? 'wrk' : 'bun')

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
/** A well-formed key value nobody issued: the node must ask Postgres (then caches the miss). */
const unknownKey = () => Array.from(randomBytes(25), (b) => CROCKFORD[b & 31]).join('')
const newFingerprint = () => randomBytes(32).toString('hex')

interface Tally {
  statuses: Map<number | string, number>
  slowest: number
  stalls: number
  total: number
}

const db = await freshDatabase()
const nodes: NodeProcess[] = []
try {
  nodes.push(await startNodeProcess(db.url!))
  nodes.push(...(await Promise.all(Array.from({ length: NODES - 1 }, () => startNodeProcess(db.url!)))))
  const first = nodes[0]!
  const acct = await first.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Ramp', plan: 'enterprise' } })
  const token: string = acct.body.api_key.token
  const product = await newProduct(first.call, token)
  // New devices need free slots: enough keys of 10,000 for every activation a ramp can make.
  const keys: string[] = []
  for (let i = 0; i < 40; i++) keys.push((await newKey(first.call, token, product.id, { activation_limit: 10_000 })).key_value)
  console.log(`${NODES} node(s) on ${new URL(db.url!).pathname.slice(1)}; ${CLIENTS} clients (${LOAD}), ` +
    `idle ${IDLE_S} s then ${BURST_S} s of load, ${ROUNDS} round(s)`)

  for (let round = 1; round <= ROUNDS; round++) {
    const logged = nodes.map((n) => countTimeouts(n.output()))
    await Bun.sleep(IDLE_S * 1000)
    const pooled = await connectionsTo(db.url!)
    const t = LOAD === 'wrk' ? await wrkRamp(nodes, token, keys) : await bunRamp(nodes, token, keys)
    const non2xx = [...t.statuses].filter(([s]) => typeof s !== 'number' || s < 200 || s > 299).reduce((a, [, n]) => a + n, 0)
    const timeouts = nodes.map((n, i) => countTimeouts(n.output()) - logged[i]!)
    console.log(`round ${round}: ${t.total} answers, non-2xx ${non2xx} (503: ${t.statuses.get(503) ?? 0}), ` +
      `slowest ${t.slowest.toFixed(0)} ms, stalls > ${STALL_MS} ms: ${t.stalls}; ` +
      `statuses ${JSON.stringify(Object.fromEntries(t.statuses))}; CONNECT_TIMEOUT lines logged per node: ${timeouts.join(', ')}; ` +
      `Postgres sessions of the nodes when the ramp began: ${pooled}`)
  }
} finally {
  await Promise.all(nodes.map((n) => n.stop()))
  await db.drop()
}

/** Sessions open on the bench database (the nodes' pools and LISTEN connections), seen from another session. */
async function connectionsTo(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
    return row!.n
  } finally {
    await sql.end()
  }
}

function countTimeouts(output: string): number {
  return output.split('CONNECT_TIMEOUT').length - 1
}

/** Bun fetch: `CLIENTS` loops, each a keep-alive client on one node, even ones unknown keys, odd ones new devices. */
async function bunRamp(nodes: NodeProcess[], token: string, keys: string[]): Promise<Tally> {
  const t: Tally = { statuses: new Map(), slowest: 0, stalls: 0, total: 0 }
  const end = performance.now() + BURST_S * 1000
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  let device = 0
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      const url = `${nodes[c % nodes.length]!.url}/v1/validate`
      while (performance.now() < end) {
        const key = c % 2 === 0 ? unknownKey() : keys[device++ % keys.length]!
        const body = JSON.stringify({ key, device_fingerprint: newFingerprint() })
        const t0 = performance.now()
        let status: number | string
        try {
          const res = await fetch(url, { method: 'POST', headers, body })
          await res.arrayBuffer()
          status = res.status
        } catch (err) {
          status = `error: ${(err as Error).name}`
        }
        const ms = performance.now() - t0
        t.statuses.set(status, (t.statuses.get(status) ?? 0) + 1)
        t.total++
        if (ms > t.slowest) t.slowest = ms
        if (ms > STALL_MS) t.stalls++
      }
    }),
  )
  return t
}

/**
 * wrk: one process per node, a Lua script that makes every request an unknown key or a new device and
 * counts statuses per thread. wrk keeps a latency histogram, not a list: the stall count is read off
 * its percentiles (the share of answers above STALL_MS, to 0.01 %).
 */
async function wrkRamp(nodes: NodeProcess[], token: string, keys: string[]): Promise<Tally> {
  const dir = mkdtempSync(join(tmpdir(), 'kw-ramp-'))
  const script = join(dir, 'ramp.lua')
  writeFileSync(script, `
local keys = {${keys.map((k) => JSON.stringify(k)).join(',')}}
local threads = {}
setup = function(thread) table.insert(threads, thread) end
init = function() counts = {}; n = 0; math.randomseed(os.time() + math.floor(os.clock() * 1e6)) end
local function chars(set, len)
  local t = {}
  for i = 1, len do local j = math.random(#set); t[i] = set:sub(j, j) end
  return table.concat(t)
end
request = function()
  n = n + 1
  local key = (n % 2 == 0) and chars("${CROCKFORD}", 25) or keys[(n % #keys) + 1]
  local body = '{"key":"' .. key .. '","device_fingerprint":"' .. chars("0123456789abcdef", 64) .. '"}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Authorization"] = "Bearer ${token}"}, body)
end
response = function(status) counts[status] = (counts[status] or 0) + 1 end
done = function(summary, latency)
  for _, thread in ipairs(threads) do
    for status, c in pairs(thread:get("counts")) do io.write(string.format("RAMP status %d %d\\n", status, c)) end
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RAMP errors %d max_us %d\\n", errors, latency.max))
  local over = 0
  for p = 0, 9999 do
    if latency:percentile(p / 100) > ${STALL_MS * 1000} then over = (10000 - p) / 10000; break end
  end
  io.write(string.format("RAMP stalls %d\\n", math.floor(over * summary.requests + 0.5)))
end
`)
  const perNode = Math.max(1, Math.floor(CLIENTS / nodes.length))
  const outs = await Promise.all(
    nodes.map(async (node) => {
      const args = ['wrk', '-t2', `-c${perNode}`, `-d${BURST_S}s`, '--timeout', '30s', '-s', script, `${node.url}/v1/validate`]
      return new Response(Bun.spawn(args, { stdout: 'pipe' }).stdout).text()
    }),
  )
  const t: Tally = { statuses: new Map(), slowest: 0, stalls: 0, total: 0 }
  for (const out of outs) {
    for (const [, status, n] of out.matchAll(/RAMP status (\d+) (\d+)/g)) {
      t.statuses.set(Number(status), (t.statuses.get(Number(status)) ?? 0) + Number(n))
      t.total += Number(n)
    }
    const m = /RAMP errors (\d+) max_us (\d+)/.exec(out)
    if (!m) throw new Error(`wrk output not understood:\n${out}`)
    if (Number(m[1]) > 0) t.statuses.set('socket errors', (t.statuses.get('socket errors') ?? 0) + Number(m[1]))
    t.total += Number(m[1])
    t.slowest = Math.max(t.slowest, Number(m[2]) / 1000)
    t.stalls += Number(/RAMP stalls (\d+)/.exec(out)?.[1] ?? 0)
  }
  return t
}

// `bun run bench:policy`: a policy edit under validate load on three nodes (issue: "a policy edit is
// in force on every node before PATCH returns, at any size"). Against the local Postgres and NATS:
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres NATS_URL=nats://127.0.0.1:4222 bun run bench:policy
//   BENCH_POLICY_KEYS=100000 BENCH_POLICY_SAMPLE=2000 BENCH_POLICY_PATCHES=5 BENCH_POLICY_CLIENTS=48 ...
//
// One policy governs BENCH_POLICY_KEYS keys (inserted in bulk with the node's own key hashing, not
// through the API). A sample of them, one device each, is validated once on every node (hot state
// warm), then validated in a loop on all three nodes while the policy is PATCHed on one node, several
// times. Each PATCH sets a new revision: `plan` "rev-<n>", `activation_limit` alternating 3 / 4 and
// entitlement `rev` = n, all three visible in a valid answer. An answer is stale when its request was
// sent after a PATCH returned and it still shows an earlier revision.
// A program, not a test: it prints figures and asserts nothing about time.
import { benchAccount, requireServices } from './fixture'
import { loadavg } from 'node:os'
import postgres from 'postgres'
import { hashKeyValue, newId, newKeyValue, normalizeKeyValue } from '../../src/infra/crypto'
import { ADMIN_TOKEN, client, createDatabaseOn, newProduct } from '../support/harness'
import { fingerprint, pool, startNodeProcess, type NodeProcess } from '../support/cluster'
import { median } from './stats'

requireServices('bun run bench:policy', ['DATABASE_URL', 'NATS_URL'])

const KEYS = Number(process.env.BENCH_POLICY_KEYS ?? 100_000)
const SAMPLE = Number(process.env.BENCH_POLICY_SAMPLE ?? 2_000)
const PATCHES = Number(process.env.BENCH_POLICY_PATCHES ?? 5)
const CLIENTS = Number(process.env.BENCH_POLICY_CLIENTS ?? 48)
const GAP_MS = Number(process.env.BENCH_POLICY_GAP_MS ?? 1500)
const limitOf = (rev: number) => (Math.abs(rev) % 2 ? 4 : 3)
const load = () => loadavg().map((x) => x.toFixed(2)).join(' ')

const db = await createDatabaseOn(process.env.DATABASE_URL!, 'keyward_bench')
const nodes: NodeProcess[] = []
try {
  console.log(`policy edit under validate load: ${KEYS.toLocaleString('en')} keys on one policy, 3 nodes, ` +
    `${SAMPLE} keys under load, ${CLIENTS} clients, ${PATCHES} PATCHes; load average at start ${load()}`)
  nodes.push(await startNodeProcess(db.url, { env: { LOG_LEVEL: 'error' } }))
  nodes.push(...(await Promise.all([1, 2].map(() => startNodeProcess(db.url, { env: { LOG_LEVEL: 'error' } })))))
  await Bun.sleep(700) // every node has heard the others' heartbeats before PATCH relies on their acks
  const admin = client(nodes[0]!.url)
  const { token } = await benchAccount(admin)
  const product = await newProduct(admin, token)
  const created = await admin('POST', '/v1/policies', {
    token,
    body: { product_id: product.id, name: 'Bench', plan: 'rev-0', activation_limit: limitOf(0), entitlements: { rev: 0 } },
  })
  if (created.status !== 201) throw new Error(`policy creation failed: ${created.status} ${JSON.stringify(created.body)}`)
  const policyId: string = created.body.id

  // The keys: one made by the API (the template row), the rest copied from it in bulk with new ids,
  // values and hashes, so every column is exactly what the API writes for a key on this policy.
  const template = await admin('POST', '/v1/keys', { token, body: { policy_id: policyId } })
  if (template.status !== 201) throw new Error(`key creation failed: ${template.status} ${JSON.stringify(template.body)}`)
  const values: string[] = [template.body.key_value]
  const t0 = performance.now()
  const sql = postgres(db.url, { max: 1, onnotice: () => {} })
  try {
    const columns = (await sql<{ column_name: string }[]>`
      select column_name from information_schema.columns
      where table_schema = current_schema() and table_name = 'license_keys' and column_name not in ('id', 'key_hash', 'key_prefix')
      order by ordinal_position`).map((r) => r.column_name)
    const copied = columns.map((c) => `t.${c}`).join(', ')
    for (let done = 1; done < KEYS; ) {
      const n = Math.min(10_000, KEYS - done)
      const batch = Array.from({ length: n }, () => newKeyValue())
      values.push(...batch)
      await sql.unsafe(
        `insert into license_keys (id, key_hash, key_prefix, ${columns.join(', ')})
         select u.id, u.hash, u.prefix, ${copied}
         from license_keys t, unnest($1::text[], $2::text[], $3::text[]) as u(id, hash, prefix)
         where t.id = $4`,
        [batch.map(() => newId('key')), batch.map((v) => hashKeyValue(normalizeKeyValue(v)!)), batch.map((v) => v.slice(0, 5)), template.body.id],
      )
      done += n
    }
    const [{ count }] = await sql`select count(*)::int as count from license_keys where policy_id = ${policyId}`
    console.log(`${count.toLocaleString('en')} keys on the policy (bulk insert ${((performance.now() - t0) / 1000).toFixed(1)} s)`)
    // What autovacuum does a minute after such an insert (BENCH_POLICY_VACUUM=0: measure before it):
    // the policy object's `keys` count, in every PATCH answer, is an index-only scan once the
    // visibility map is set, and reads every key row before.
    if (process.env.BENCH_POLICY_VACUUM !== '0') await sql`vacuum analyze license_keys`
    console.log(`license_keys vacuumed: ${process.env.BENCH_POLICY_VACUUM !== '0'}`)
  } finally {
    await sql.end()
  }

  // Warm: every sampled key validated once on every node with its one device.
  const sample = Array.from({ length: SAMPLE }, (_, i) => ({
    body: JSON.stringify({ key: values[Math.floor((i * values.length) / SAMPLE)]!, device_fingerprint: fingerprint(i, 'be') }),
  }))
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  let refusedWarm = 0
  for (const node of nodes) {
    await pool(sample, 16, async (s) => {
      const a = (await (await fetch(`${node.url}/v1/validate`, { method: 'POST', headers, body: s.body })).json()) as { valid: boolean }
      if (!a.valid) refusedWarm++
    })
  }
  console.log(`warmed ${SAMPLE} keys × 3 nodes (${refusedWarm} refused)`)

  const patch = async (rev: number) => {
    const startedAt = performance.now()
    const res = await fetch(`${nodes[(((rev % 3) + 3) % 3)]!.url}/v1/policies/${policyId}`, {
      method: 'PATCH',
      headers,
      body: JSON.stringify({ plan: `rev-${rev}`, activation_limit: limitOf(rev), entitlements: { rev } }),
    })
    await res.arrayBuffer()
    return { rev, startedAt, returnedAt: performance.now(), status: res.status }
  }
  // For reference: the same PATCH without load (negative revisions, undone by the first loaded PATCH).
  const quiet: number[] = []
  for (let i = 1; i <= PATCHES; i++) {
    const p = await patch(-i)
    quiet.push(p.returnedAt - p.startedAt)
  }
  const idle = await patch(0)
  quiet.push(idle.returnedAt - idle.startedAt)

  // Load: CLIENTS loops over the sample, spread evenly over the nodes, each answer kept with its send time.
  type Seen = { sentAt: number; rev: number; consistent: boolean; ok: boolean }
  const seen: Seen[] = []
  let running = true
  const loops = Array.from({ length: CLIENTS }, async (_, c) => {
    const url = `${nodes[c % 3]!.url}/v1/validate`
    for (let i = c; running; i += CLIENTS) {
      const sentAt = performance.now()
      const res = await fetch(url, { method: 'POST', headers, body: sample[i % SAMPLE]!.body })
      const a = (await res.json()) as { valid?: boolean; plan?: string; activation_limit?: number; entitlements?: { rev?: number } }
      const rev = Number(/^rev-(-?\d+)$/.exec(a.plan ?? '')?.[1] ?? -1)
      const consistent = a.activation_limit === limitOf(rev) && a.entitlements?.rev === rev
      seen.push({ sentAt, rev, consistent, ok: res.status === 200 && a.valid === true })
    }
  })
  const loadStart = performance.now()
  const patches: { rev: number; startedAt: number; returnedAt: number; status: number }[] = []
  await Bun.sleep(GAP_MS)
  for (let rev = 1; rev <= PATCHES; rev++) {
    patches.push(await patch(rev))
    await Bun.sleep(GAP_MS)
  }
  running = false
  await Promise.all(loops)
  const seconds = (performance.now() - loadStart) / 1000

  // A request sent after PATCH n returned must show revision n or later (a later one is a PATCH in flight).
  let checked = 0
  let stale = 0
  let inconsistent = 0
  let failed = 0
  for (const s of seen) {
    if (!s.ok) failed++
    if (s.rev >= 0 && !s.consistent) inconsistent++
    const last = patches.findLast((p) => p.returnedAt <= s.sentAt)
    if (!last) continue
    checked++
    if (s.rev < last.rev) stale++
  }
  const ms = patches.map((p) => p.returnedAt - p.startedAt)
  console.log(`PATCH /v1/policies/:id (${PATCHES}, on nodes ${patches.map((p) => p.rev % 3).join(',')}; statuses ${[...new Set(patches.map((p) => p.status))].join(',')}): ` +
    `${ms.map((x) => x.toFixed(1)).join(', ')} ms; median ${median(ms).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms (target < 2000 ms)`)
  console.log(`for reference, the same PATCH without load (${quiet.length}): median ${median(quiet).toFixed(1)} ms, max ${Math.max(...quiet).toFixed(1)} ms`)
  console.log(`validate during the run: ${seen.length} answers in ${seconds.toFixed(1)} s = ${(seen.length / seconds).toFixed(0)} req/s over 3 nodes ` +
    `(${CLIENTS} fetch loops in one process); not 200 + valid: ${failed}; plan/limit/entitlements disagreeing: ${inconsistent}`)
  console.log(`stale answers (sent after a PATCH returned, showing an earlier revision): ${stale} of ${checked} checked (target 0)`)
  console.log(`load average at end ${load()}`)
} finally {
  await Promise.all(nodes.map((n) => n.stop()))
  await db.drop()
}

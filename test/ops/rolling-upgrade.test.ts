// A rolling upgrade (docs/operations.md, "Rolling upgrade"): a node of the previous release serves a
// cluster; this checkout's migrations run while it serves; a node of this checkout joins; both answer
// validates throughout (a loop against both nodes, zero failures), and each reads what the other wrote.
//
// The previous release: KEYWARD_PREVIOUS_CHECKOUT (a directory with its node_modules installed), or else
// a git worktree of KEYWARD_PREVIOUS_REF (default 321ed4f: main before this turn's migrations) made
// under /tmp and installed from the lockfile's cache. Real Postgres, NATS and Redis (CI=true: required).
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { createDatabaseOn, fingerprint, newKey, newProduct, createAccount, SECRET_KEY } from '../support/harness'
import { startNodeProcess, type NodeProcess } from '../support/cluster'
import { requireEnvironment } from '../support/environment'
import { migrationFiles } from '../../src/infra/migrate'

setDefaultTimeout(300_000)
const ROOT = join(import.meta.dir, '..', '..')
const PREVIOUS_REF = process.env.KEYWARD_PREVIOUS_REF ?? '321ed4f'
await requireEnvironment('test/ops/rolling-upgrade.test.ts', ['postgres', 'nats', 'redis'])

let previous: string
let madeWorktree = false
let db: { url: string; drop(): Promise<void> }
let old: NodeProcess
let current: NodeProcess | null = null

async function sh(cmd: string[], cwd: string) {
  const p = Bun.spawn(cmd, { cwd, stdout: 'pipe', stderr: 'pipe' })
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited])
  if (code !== 0) throw new Error(`${cmd.join(' ')} (in ${cwd}) exited ${code}: ${out}${err}`)
  return out
}

beforeAll(async () => {
  if (process.env.KEYWARD_PREVIOUS_CHECKOUT) previous = process.env.KEYWARD_PREVIOUS_CHECKOUT
  else {
    previous = `/tmp/keyward-previous-${PREVIOUS_REF}-${process.pid}`
    await sh(['git', 'worktree', 'add', '--detach', previous, PREVIOUS_REF], ROOT)
    madeWorktree = true
    await sh(['bun', 'install', '--frozen-lockfile'], previous)
  }
  if (!existsSync(join(previous, 'src', 'main.ts'))) throw new Error(`${previous} is not a Keyward checkout`)
  db = await createDatabaseOn(process.env.DATABASE_URL!, 'keyward_rolling')
}, 300_000)
afterAll(async () => {
  await current?.stop()
  await old?.stop()
  await db?.drop()
  if (madeWorktree) await sh(['git', 'worktree', 'remove', '--force', previous], ROOT).catch(() => {})
}, 120_000)

const applied = async (url: string) => {
  const postgres = (await import('postgres')).default
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    return (await sql<{ version: string }[]>`select version from schema_migrations order by version`).map((r) => r.version)
  } finally {
    await sql.end()
  }
}

test('a node of the previous release and one of this checkout serve one cluster while the migrations run: zero failed validates', async () => {
  const oldFiles = readdirSync(join(previous, 'sql')).filter((f) => /^\d{3}_/.test(f)).sort()
  const newFiles = migrationFiles().filter((f) => !oldFiles.includes(f))
  expect(newFiles.length).toBeGreaterThan(0) // this checkout has migrations the previous one lacks

  // The previous release creates the cluster's schema and data.
  old = await startNodeProcess(db.url, { root: previous, timeoutMs: 120_000 })
  expect(await applied(db.url)).toEqual(oldFiles)
  const { token } = await createAccount(old.call, 'growth', 'Rolling')
  const product = await newProduct(old.call, token, 'rolling')
  const keys = await Promise.all(Array.from({ length: 3 }, () => newKey(old.call, token, product.id, { activation_limit: 5 })))
  const devices = keys.map(() => fingerprint())
  for (let i = 0; i < keys.length; i++) expect((await old.call('POST', '/v1/validate', { token, body: { key: keys[i]!.key_value, device_fingerprint: devices[i] } })).body.valid).toBe(true)

  // A loop of validates against every node up, from now until the end.
  const failures: string[] = []
  const answered = { old: 0, current: 0 }
  let running = true
  const loop = (async () => {
    let i = 0
    while (running) {
      const k = i % keys.length
      const targets: [keyof typeof answered, NodeProcess][] = [['old', old]]
      if (current) targets.push(['current', current])
      for (const [name, node] of targets) {
        const res = await node.call('POST', '/v1/validate', { token, body: { key: keys[k]!.key_value, device_fingerprint: devices[k] } }).catch((e) => ({ status: 0, body: String(e) }))
        if (res.status !== 200 || res.body?.valid !== true) failures.push(`${name}: ${res.status} ${JSON.stringify(res.body)}`)
        else answered[name]++
      }
      i++
    }
  })()

  // This checkout's migrations, while the old node serves.
  const before = answered.old
  const migrate = Bun.spawn(['bun', 'run', 'keyward', 'migrate'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', DATABASE_URL: db.url, SECRET_KEY, LOG_LEVEL: 'silent' },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [migrateOut, migrateErr, code] = await Promise.all([new Response(migrate.stdout).text(), new Response(migrate.stderr).text(), migrate.exited])
  if (code !== 0) throw new Error(`migrate exited ${code}: ${migrateOut}${migrateErr}`)
  expect(migrateOut).toContain(`Applied: ${newFiles.join(', ')}`)
  expect(await applied(db.url)).toEqual(migrationFiles())

  // A node of this checkout joins the cluster (same database, NATS and Redis).
  current = await startNodeProcess(db.url, { timeoutMs: 120_000 })
  while (answered.current < 20) await Bun.sleep(25)

  // Each reads what the other writes: a key made on the new node validates on the old one and back,
  // a device taken on one counts on the other.
  const made = await newKey(current.call, token, product.id, { activation_limit: 2 })
  const d1 = fingerprint()
  expect((await old.call('POST', '/v1/validate', { token, body: { key: made.key_value, device_fingerprint: d1 } })).body).toMatchObject({ valid: true, activations_used: 1 })
  expect((await current.call('POST', '/v1/validate', { token, body: { key: made.key_value, device_fingerprint: fingerprint() } })).body).toMatchObject({ valid: true, activations_used: 2 })
  expect((await old.call('POST', '/v1/validate', { token, body: { key: made.key_value, device_fingerprint: fingerprint() } })).body).toMatchObject({ valid: false, reason: 'activation_limit' })
  const oldMade = await newKey(old.call, token, product.id)
  expect((await current.call('POST', '/v1/validate', { token, body: { key: oldMade.key_value, device_fingerprint: fingerprint() } })).body.valid).toBe(true)
  // A change on one node reaches the other: revoked on the new node, refused on the old.
  expect((await current.call('POST', `/v1/keys/${oldMade.id}/revoke`, { token, body: {} })).status).toBe(200)
  let refused = false
  for (let i = 0; i < 100 && !refused; i++) {
    refused = (await old.call('POST', '/v1/validate', { token, body: { key: oldMade.key_value, device_fingerprint: fingerprint() } })).body.reason === 'revoked'
    if (!refused) await Bun.sleep(50)
  }
  expect(refused).toBe(true)

  running = false
  await loop
  expect(failures).toEqual([])
  expect(answered.old).toBeGreaterThan(before) // the old node answered while the migrations ran and after
  expect(answered.current).toBeGreaterThanOrEqual(20)
})

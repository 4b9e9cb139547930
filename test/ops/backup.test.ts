// `bun run keyward backup` / `restore` (docs/operations.md, "Backup and restore"), as an operator runs them:
// - Postgres: the backup is taken while a node serves validates (one consistent snapshot), restored into
//   a fresh database; every key validates there with its devices (no new seat), the root and a rotated
//   signing key still verify the licenses issued before, and the active signer signs on.
// - A restore over data is refused unless --force; another SECRET_KEY is refused; a cut file is refused.
// - The embedded store: backup with the server stopped, restored into a new DATA_DIR, and the same file
//   restored into Postgres (the format is the same for both stores).
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { client, createAccount, createDatabaseOn, fingerprint, newKey, newProduct, SECRET_KEY, testConfig, type Client } from '../support/harness'
import { requireEnvironment } from '../support/environment'
import { embeddedEnv } from '../support/helpers'
import { envelopeOf, verifiesWith } from '../support/offline'
import { certifiedKey, rootKeyOf } from '../support/signing'

setDefaultTimeout(240_000)
const ROOT = join(import.meta.dir, '..', '..')
const BASE = process.env.DATABASE_URL
await requireEnvironment('test/ops/backup.test.ts', ['postgres'])

const dir = mkdtempSync(join(tmpdir(), 'keyward-backup-'))
const dbs: { drop(): Promise<void> }[] = []
afterAll(async () => {
  for (const d of dbs) await d.drop().catch(() => {})
  rmSync(dir, { recursive: true, force: true })
})

async function freshDb(prefix: string) {
  const db = await createDatabaseOn(BASE!, prefix)
  dbs.push(db)
  return db.url
}

/** `bun run keyward …` with the store of `env` (DATABASE_URL or DATA_DIR). */
async function keyward(env: Record<string, string>, ...args: string[]) {
  const proc = Bun.spawn(['bun', 'run', 'keyward', ...args], { cwd: ROOT, env: embeddedEnv(env), stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

const pgNode = (url: string) => startNode(testConfig({}, url), { log: createLogger('silent') })
const embeddedNode = (dataDir: string) => startNode(testConfig({ DATA_DIR: dataDir, NATS_URL: undefined, REDIS_URL: undefined }), { log: createLogger('silent') })

interface World {
  accountId: string
  token: string
  root: string
  keys: { id: string; value: string; devices: string[] }[]
  licenses: { text: string; kid: string }[]
  rotatedKid: string
}

/** On a running node: an account, keys with devices, a license signed by the root, a signing key activated and a license by it. */
async function populate(call: Client): Promise<World> {
  const { id: accountId, token } = await createAccount(call, 'growth', 'Backup Co')
  const product = await newProduct(call, token, 'backed-up')
  const keys: World['keys'] = []
  for (let i = 0; i < 4; i++) {
    const k = await newKey(call, token, product.id, { activation_limit: 3 })
    const devices = Array.from({ length: 1 + (i % 3) }, fingerprint)
    for (const d of devices) expect((await call('POST', '/v1/validate', { token, body: { key: k.key_value, device_fingerprint: d } })).body.valid).toBe(true)
    keys.push({ id: k.id, value: k.key_value, devices })
  }
  const root = (await call('GET', '/v1/signing-keys', { token })).body.root.public_key
  const licenses: World['licenses'] = []
  const issue = async (key: World['keys'][number]) => {
    const res = await call('POST', `/v1/keys/${key.id}/offline-licenses`, { token, body: { device_fingerprint: key.devices[0] } })
    expect(res.status).toBe(201)
    licenses.push({ text: res.body.license, kid: envelopeOf(res.body.license).kid })
  }
  await issue(keys[0]!) // by the root
  const created = await call('POST', '/v1/signing-keys', { token, body: {} })
  expect(created.status).toBe(201)
  expect((await call('POST', `/v1/signing-keys/${created.body.kid}/activate`, { token })).body.state).toBe('active')
  await issue(keys[1]!) // by the rotated signing key
  expect(licenses[1]!.kid).toBe(created.body.kid)
  return { accountId, token, root, keys, licenses, rotatedKid: created.body.kid }
}

/** Everything the backup must have kept, checked on a node of the restored store. */
async function checkRestored(call: Client, w: World) {
  for (const k of w.keys) {
    const before = (await call('GET', `/v1/keys/${k.id}`, { token: w.token })).body
    expect(before.activations_used).toBe(k.devices.length)
    for (const d of k.devices) {
      const res = await call('POST', '/v1/validate', { token: w.token, body: { key: k.value, device_fingerprint: d } })
      expect(res.body).toMatchObject({ valid: true, activations_used: k.devices.length })
    }
    // the same devices, no new seat taken
    expect((await call('GET', `/v1/keys/${k.id}`, { token: w.token })).body.activations_used).toBe(k.devices.length)
  }
  // The key set: the same root, the rotated key still active and certified by it.
  const set = (await call('GET', '/v1/signing-keys', { token: w.token })).body
  expect(set.root.public_key).toBe(w.root)
  const root = rootKeyOf(w.root)
  const rotated = set.keys.find((k: any) => k.kid === w.rotatedKid)
  expect(rotated.state).toBe('active')
  // The licenses issued before the backup: each verifies offline with the key its envelope names ...
  const rootPem = root.export({ format: 'pem', type: 'spki' }).toString()
  expect(verifiesWith(rootPem, w.licenses[0]!.text)).toBe(true)
  const certified = certifiedKey(root, rotated.certificate, w.accountId)!
  expect(verifiesWith(certified.publicKey.export({ format: 'pem', type: 'spki' }).toString(), w.licenses[1]!.text)).toBe(true)
  // ... and the restored server knows them (sync: valid, renewed by the same signing key).
  const sync = await call('POST', '/v1/offline-licenses/sync', { token: w.token, body: { licenses: w.licenses.map((l) => l.text) } })
  expect(sync.body.results.map((r: any) => r.status)).toEqual(['valid', 'valid'])
  expect(envelopeOf(sync.body.results[1].license).kid).toBe(w.rotatedKid)
  // New licenses are signed by the restored private key (SECRET_KEY opened it).
  const fresh = await call('POST', `/v1/keys/${w.keys[2]!.id}/offline-licenses`, { token: w.token, body: { device_fingerprint: w.keys[2]!.devices[0] } })
  expect(fresh.status).toBe(201)
  expect(verifiesWith(certified.publicKey.export({ format: 'pem', type: 'spki' }).toString(), fresh.body.license)).toBe(true)
}

let source: { url: string; node: Node; world: World; file: string }

beforeAll(async () => {
  const url = await freshDb('keyward_backup_src')
  const node = await pgNode(url)
  source = { url, node, world: await populate(client(node.url)), file: join(dir, 'pg.kwbackup') }
})
afterAll(async () => {
  await source?.node.stop()
})

test('Postgres: a backup taken while the node serves validates restores into a fresh database where everything checks', async () => {
  const call = client(source.node.url)
  const w = source.world
  // Validates and a new key go on during the backup: the file is one snapshot of a serving database.
  let stop = false
  let served = 0
  const load = (async () => {
    while (!stop) {
      const k = w.keys[served % w.keys.length]!
      const res = await call('POST', '/v1/validate', { token: w.token, body: { key: k.value, device_fingerprint: k.devices[0] } })
      expect(res.body.valid).toBe(true)
      served++
    }
  })()
  const env = { DATABASE_URL: source.url, SECRET_KEY }
  const made = await keyward(env, 'backup', source.file)
  stop = true
  await load
  if (made.code !== 0) throw new Error(`backup exit ${made.code}: ${made.stdout}${made.stderr}`)
  expect(made.stdout).toContain('keys: 4, devices: 7')
  expect(served).toBeGreaterThan(0)
  // No secret in clear in the file: key values are hashed, private keys sealed.
  const text = readFileSync(source.file, 'utf8')
  for (const k of w.keys) expect(text).not.toContain(k.value)
  expect(text).not.toContain('PRIVATE KEY')

  const target = await freshDb('keyward_backup_dst')
  const restored = await keyward({ DATABASE_URL: target, SECRET_KEY }, 'restore', source.file)
  if (restored.code !== 0) throw new Error(`restore exit ${restored.code}: ${restored.stdout}${restored.stderr}`)
  expect(restored.stdout).toContain('keys: 4, devices: 7')
  const node = await pgNode(target)
  try {
    await checkRestored(client(node.url), w)
  } finally {
    await node.stop()
  }

  // Again into the same (now full) database: refused, nothing changed; --force replaces the data.
  const again = await keyward({ DATABASE_URL: target, SECRET_KEY }, 'restore', source.file)
  expect(again.code).toBe(2)
  expect(again.stderr).toContain('the database is not empty')
  expect(again.stderr).toContain('--force')
  const forced = await keyward({ DATABASE_URL: target, SECRET_KEY }, 'restore', source.file, '--force')
  if (forced.code !== 0) throw new Error(`restore --force exit ${forced.code}: ${forced.stderr}`)
  const node2 = await pgNode(target)
  try {
    await checkRestored(client(node2.url), w)
  } finally {
    await node2.stop()
  }
})

test('refused: another SECRET_KEY, a file cut short, a file that is no backup', async () => {
  const target = await freshDb('keyward_backup_refused')
  const env = { DATABASE_URL: target, SECRET_KEY: 'ab'.repeat(32) }
  const other = await keyward(env, 'restore', source.file)
  expect(other.code).toBe(2)
  expect(other.stderr).toContain('another SECRET_KEY')
  const lines = readFileSync(source.file, 'utf8').split('\n')
  const cut = join(dir, 'cut.kwbackup')
  writeFileSync(cut, lines.slice(0, Math.floor(lines.length / 2)).join('\n') + '\n')
  const short = await keyward({ DATABASE_URL: target, SECRET_KEY }, 'restore', cut)
  expect(short.code).toBe(2)
  expect(short.stderr).toContain('incomplete')
  const junk = join(dir, 'junk.txt')
  writeFileSync(junk, 'hello\n')
  const notOne = await keyward({ DATABASE_URL: target, SECRET_KEY }, 'restore', junk)
  expect(notOne.code).toBe(2)
  expect(notOne.stderr).toContain('not a Keyward backup')
  // Nothing was written by the refusals: the database is still empty.
  const probe = await keyward({ DATABASE_URL: target, SECRET_KEY }, 'accounts', 'list')
  expect(probe.stdout).toContain('# none of 0')
})

test('the embedded store: backup with the server stopped, restore into a new DATA_DIR and into Postgres', async () => {
  const from = join(dir, 'embedded-a')
  const node = await embeddedNode(from)
  let w: World
  try {
    w = await populate(client(node.url))
  } finally {
    await node.stop()
  }
  const file = join(dir, 'embedded.kwbackup')
  const made = await keyward({ DATA_DIR: from, SECRET_KEY }, 'backup', file)
  if (made.code !== 0) throw new Error(`backup exit ${made.code}: ${made.stdout}${made.stderr}`)
  expect(made.stdout).toContain('keys: 4, devices: 7')

  const to = join(dir, 'embedded-b')
  const restored = await keyward({ DATA_DIR: to, SECRET_KEY }, 'restore', file)
  if (restored.code !== 0) throw new Error(`restore exit ${restored.code}: ${restored.stdout}${restored.stderr}`)
  const node2 = await embeddedNode(to)
  try {
    await checkRestored(client(node2.url), w)
  } finally {
    await node2.stop()
  }

  // The same file into Postgres: one format for both stores.
  const pg = await freshDb('keyward_backup_cross')
  const crossed = await keyward({ DATABASE_URL: pg, SECRET_KEY }, 'restore', file)
  if (crossed.code !== 0) throw new Error(`restore into Postgres exit ${crossed.code}: ${crossed.stderr}`)
  const node3 = await pgNode(pg)
  try {
    await checkRestored(client(node3.url), w)
  } finally {
    await node3.stop()
  }
})

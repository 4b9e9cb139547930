// Postgres outage: the node reaches its database through a TCP proxy the test takes down and up.
// While cut: known keys and devices keep validating from memory (even past the cache TTL), a new
// device or a key never seen is 503 and nothing is half-written. Restored: everything works again without a restart.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import postgres from 'postgres'
import { createPglite, type Db } from '../../src/infra/db'
import { startNode, type Node } from '../../src/node'
import { client, freshDatabase, newKey, newProduct, ADMIN_TOKEN, testConfig, type Client, type TestDb } from '../support/harness'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { activationRows, events, fingerprint, until, validate } from './support'

const CACHE_TTL_MS = 400
let proxy: TcpProxy
let node: Node
let call: Client
let db: TestDb | null = null
let embedded: { close(): Promise<void>; db: Db } | null = null

/**
 * What startEmbedded builds, but through the proxy: PGlite has one session, so one connection, and
 * LISTEN runs on it (a dedicated LISTEN connection would wait forever for a second session).
 */
function singleSession(port: number): Db {
  const listeners = new Map<string, Set<() => void>>()
  const onnotify = (channel: string) => listeners.get(channel)?.forEach((fn) => fn())
  const sql = postgres({ host: '127.0.0.1', port, database: 'postgres', username: 'postgres', max: 1, onnotice: () => {}, connect_timeout: 5, backoff: (n: number) => Math.min(0.02 * 2 ** n, 0.25), ...({ onnotify } as {}) })
  return {
    sql,
    kind: 'embedded',
    async listen(channel, onNotify) {
      let set = listeners.get(channel)
      if (!set) {
        listeners.set(channel, (set = new Set()))
        await sql.unsafe(`listen "${channel}"`)
      }
      set.add(onNotify)
      return async () => void set.delete(onNotify)
    },
    ping: () => sql`select 1`.then(() => true, () => false),
    close: () => sql.end({ timeout: 5 }),
  }
}

beforeAll(async () => {
  // background writers slowed down so the cut lands while the connection is idle
  const env = { CACHE_TTL_MS: String(CACHE_TTL_MS), SWEEP_INTERVAL_MS: '600000', FLUSH_INTERVAL_MS: '600000' }
  if (process.env.DATABASE_URL) {
    db = await freshDatabase()
    const url = new URL(db.url!)
    proxy = await startTcpProxy(url.hostname, Number(url.port || 5432))
    url.host = `127.0.0.1:${proxy.port}`
    node = await startNode(testConfig(env, url.toString()))
  } else {
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
    const pglite = await createPglite()
    const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 1 })
    await server.start()
    const [host, port] = server.getServerConn().split(':')
    proxy = await startTcpProxy(host, Number(port))
    const viaProxy = singleSession(proxy.port)
    embedded = {
      db: viaProxy,
      async close() {
        await viaProxy.close()
        await server.stop()
        await pglite.close()
      },
    }
    node = await startNode(testConfig(env), { db: viaProxy })
  }
  call = client(node.url)
}, 60_000)

afterAll(async () => {
  proxy?.restore()
  await node?.stop()
  await proxy?.close()
  await embedded?.close()
  await db?.drop()
})

test('known devices validate through an outage, new ones get 503, and all recovers without a restart', async () => {
  const account = await call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Outage', plan: 'growth' } })
  const token: string = account.body.api_key.token
  const product = await newProduct(call, token)
  const key = await newKey(call, token, product.id, { activation_limit: 3 })
  const [known, fresh] = [fingerprint(), fingerprint()]
  const unknownKey = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
  expect((await validate(call, token, { key: key.key_value, device_fingerprint: known, app_version: '1.0' })).body.valid).toBe(true)
  expect((await validate(call, token, { key: unknownKey, device_fingerprint: known })).body.reason).toBe('not_found')

  proxy.refuse() // connection refused: every query fails at once, as with an unreachable database
  // past the cache TTL, so both the caller and the key would normally be re-read
  await Bun.sleep(CACHE_TTL_MS + 100)
  for (let i = 0; i < 3; i++) {
    const res = await validate(call, token, { key: key.key_value, device_fingerprint: known, app_version: '2.0' })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ valid: true, activations_used: 1 })
  }
  expect((await validate(call, token, { key: unknownKey, device_fingerprint: known })).body.reason).toBe('not_found')
  // A key this node has never seen cannot be known to be unknown without Postgres: 503, not a refusal
  // (docs/api.md, validate's statuses).
  const neverSeen = await validate(call, token, { key: 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012', device_fingerprint: known })
  expect([neverSeen.status, neverSeen.body.code]).toEqual([503, 'unavailable'])
  const refused = await validate(call, token, { key: key.key_value, device_fingerprint: fresh })
  expect(refused.status).toBe(503)
  expect(refused.body.code).toBe('unavailable')
  expect(refused.headers.get('content-type')).toBe('application/problem+json')
  expect(JSON.stringify(refused.body)).not.toMatch(/ECONN|CONNECTION_|postgres/i)
  const deactivate = await call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: known } })
  expect(deactivate.status).toBe(503)
  // the last-seen update is kept for later, not lost
  await expect(node.deps.validation.flush()).rejects.toBeDefined()

  proxy.restore()
  const recovered = await until(
    () => validate(call, token, { key: key.key_value, device_fingerprint: fresh }),
    (r) => r.status === 200,
    15_000,
  )
  expect(recovered.body).toMatchObject({ valid: true, activations_used: 2 })
  // nothing half-written: one activation and one event per device
  const rows = await activationRows(node.deps.sql, key.id)
  expect(rows.map((r) => r.device_fingerprint).sort()).toEqual([known, fresh].sort())
  expect(await events(node.deps.sql, 'activation.created', key.id)).toHaveLength(2)
  await node.deps.validation.flush()
  const detail = await call('GET', `/v1/keys/${key.id}`, { token })
  expect(detail.body.activations.find((a: { device_fingerprint: string }) => a.device_fingerprint === known).app_version).toBe('2.0')
  // writes work again: deactivation frees the slot at once
  expect((await call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: known } })).body.deactivated).toBe(true)
  expect((await validate(call, token, { key: key.key_value, device_fingerprint: fresh })).body.activations_used).toBe(1)
}, 60_000)

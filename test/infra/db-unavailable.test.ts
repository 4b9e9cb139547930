// Postgres unreachable: calls that need it answer 503 `unavailable` (a problem that leaks nothing),
// /readyz says so, and the node recovers by itself once Postgres is back.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { connectPostgres, createPglite } from '../../src/infra/db'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { ADMIN_TOKEN, client, freshDatabase, realPostgres, testConfig, type Client, type TestDb } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'

setDefaultTimeout(60_000)

let base: TestDb | null = null
let pglite: { server: any; db: any } | null = null
let proxy: TcpProxy
let node: Node
let call: Client
beforeAll(async () => {
  let target: { host: string; port: number; database: string }
  if (realPostgres) {
    base = await freshDatabase()
    const u = new URL(base.url!)
    target = { host: u.hostname, port: Number(u.port || 5432), database: u.pathname.slice(1) }
  } else {
    // Embedded: our own PGlite behind its socket server, so the cut can be cleaned up (see afterCut).
    const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
    const db = await createPglite()
    const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: 1 })
    await server.start()
    pglite = { server, db }
    const [host, port] = server.getServerConn().split(':')
    target = { host, port: Number(port), database: 'postgres' }
  }
  proxy = await startTcpProxy(target.host, target.port)
  const direct = connectPostgres(`postgres://postgres@127.0.0.1:${proxy.port}/${target.database}`, realPostgres ? 4 : 1)
  // PGlite serves one session, so no dedicated LISTEN connection there (workers fall back to polling)
  const db = realPostgres ? direct : { ...direct, listen: async () => async () => {} }
  node = await startNode(testConfig(), { db, log: createLogger('silent') })
  call = client(node.url)
}, 60_000)
afterAll(async () => {
  proxy.restore()
  await node.stop()
  await node.deps.db.close()
  proxy.close()
  await afterCut()
  await base?.drop()
  await pglite?.server.stop()
  await pglite?.db.close()
})

/**
 * PGlite has one session: when a connection vanishes inside a transaction, its socket server does not
 * always roll it back, and every later connection waits behind it. Real Postgres rolls back a dropped
 * session by itself; here we do it for the test rig.
 */
async function afterCut() {
  if (!pglite) return
  await Bun.sleep(50)
  if (pglite.db.isInTransaction()) await pglite.db.exec('rollback')
  pglite.server.queryQueue.lastHandlerId = null
}

test('503 while Postgres is unreachable, then back to normal without a restart', async () => {
  const created = await call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Outage', plan: 'growth' } })
  const token = created.body.api_key.token
  expect((await call('GET', '/v1/products', { token })).status).toBe(200)
  expect((await call('GET', '/readyz')).body.postgres).toBe('ok')

  proxy.refuse() // connection refused, as by a stopped server
  await afterCut()
  // the API key is known to the node, so the call gets as far as needing Postgres
  for (const [method, path, body] of [
    ['GET', '/v1/products', undefined],
    ['POST', '/v1/products', { name: 'x', slug: 'x' }],
    ['GET', '/v1/keys', undefined],
  ] as const) {
    const res = await call(method, path, { token, body })
    const problem = expectProblem(res, 503, 'unavailable')
    expect(JSON.stringify(problem)).not.toMatch(/127\.0\.0\.1|ECONN|postgres|CONNECTION_/i)
  }
  const ready = await call('GET', '/readyz')
  expect(ready.status).toBe(503)
  expect(ready.body.postgres).toBe('down')
  expect((await call('GET', '/healthz')).status).toBe(200)

  proxy.restore()
  let res = await call('GET', '/v1/products', { token })
  for (let i = 0; i < 50 && res.status !== 200; i++) {
    await Bun.sleep(100)
    res = await call('GET', '/v1/products', { token })
  }
  expect(res.status).toBe(200)
  expect(res.body.data).toEqual([])
  expect((await call('GET', '/readyz')).status).toBe(200)
})

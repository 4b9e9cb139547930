// Test harness: a fresh database per test file (real Postgres when DATABASE_URL is set, in-memory
// PGlite otherwise), a node on a random port, and a small HTTP client (over the socket, or straight
// into the app with `app.handle`). `useHarness()` is the usual preamble of a test file.
import { afterAll, beforeAll } from 'bun:test'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { loadConfig, type Config } from '../../src/config'
import { connectPostgres, startEmbedded, type Db } from '../../src/infra/db'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef'
export const SECRET_KEY = '0'.repeat(63) + '1'
export const realPostgres = !!process.env.DATABASE_URL

export interface TestDb {
  url: string | null
  name: string | null
  open(): Promise<Db>
  drop(): Promise<void>
}

/** A brand-new database for this run (dropped by `drop`). */
export async function freshDatabase(): Promise<TestDb> {
  const base = process.env.DATABASE_URL
  if (!base) {
    let db: Db | null = null
    return {
      url: null,
      name: null,
      async open() {
        db ??= await startEmbedded(null)
        return db
      },
      async drop() {
        await db?.close()
      },
    }
  }
  const db = await createDatabaseOn(base, 'keyward_test')
  return {
    ...db,
    async open() {
      return connectPostgres(db.url)
    },
  }
}

/** A brand-new database named `<prefix>_<random>` on the server of `base`; `drop` removes it. */
export async function createDatabaseOn(base: string, prefix: string) {
  const name = `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  const admin = postgres(base, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    name,
    async drop() {
      const a = postgres(base, { max: 1, onnotice: () => {} })
      await a.unsafe(`drop database if exists ${name} with (force)`)
      await a.end()
    },
  }
}

export function testConfig(overrides: Record<string, string | undefined> = {}, dbUrl: string | null = null): Config {
  return loadConfig({
    ADMIN_TOKEN,
    SECRET_KEY,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
    DEMO_ACCOUNT: 'false',
    DATA_DIR: `/tmp/keyward-test-${process.pid}`,
    ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
    NATS_URL: process.env.NATS_URL,
    REDIS_URL: process.env.REDIS_URL,
    ...overrides,
  })
}

export interface Harness {
  node: Node
  db: TestDb
  config: Config
  call: Client
  /** A new account on `plan` with its full_access token. */
  account(plan?: string): Promise<{ id: string; token: string }>
  close(): Promise<void>
}

export interface Reply<T = any> {
  status: number
  body: T
  headers: Headers
}

export type Client = (
  method: string,
  path: string,
  opts?: { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> },
) => Promise<Reply>

type CallOptions = Parameters<Client>[2]

function toRequest(baseUrl: string, method: string, path: string, opts: CallOptions = {}): Request {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) }
  if (opts.token) headers.authorization = `Bearer ${opts.token}`
  let body: string | undefined
  if (opts.raw !== undefined) body = opts.raw
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body)
    headers['content-type'] ??= 'application/json'
  }
  return new Request(baseUrl + path, { method, headers, body })
}

/**
 * Every answer the shared clients saw in this process, and the last OpenAPI document they fetched:
 * test/support/observed-statuses.ts checks that each status seen on an operation is documented there.
 */
export const observed: { calls: { method: string; path: string; status: number }[]; document: unknown } =
  ((globalThis as { keywardObserved?: typeof observed }).keywardObserved ??= { calls: [], document: null })

async function toReply(res: Response, method: string, path: string): Promise<Reply> {
  const text = await res.text()
  let parsed: unknown = text
  try {
    parsed = text ? JSON.parse(text) : null
  } catch {}
  observed.calls.push({ method, path, status: res.status })
  if (path === '/docs/json' && res.status === 200) observed.document = parsed
  return { status: res.status, body: parsed, headers: res.headers }
}

/** A client over HTTP: a real socket, Bun's HTTP parser and router (the validate fast path included). */
export function client(baseUrl: string): Client {
  return async (method, path, opts) => toReply(await fetch(toRequest(baseUrl, method, path, opts)), method, path)
}

/**
 * A client that hands each request to the node's Elysia app (`app.handle`): no socket, same kernel,
 * auth and routes. Not the validate fast path: POST /v1/validate is served by Bun's router in front
 * of Elysia (modules/validation/fast-path.ts), so it reaches the documented Elysia route instead.
 */
export function appClient(node: Node): Client {
  return async (method, path, opts) => toReply(await node.app.handle(toRequest(node.url, method, path, opts)), method, path)
}

/** A new account (operator route) and its full_access token. */
export async function createAccount(call: Client, plan = 'growth', name = `Test ${plan}`): Promise<{ id: string; token: string }> {
  const res = await call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name, plan } })
  if (res.status !== 201) throw new Error(`account creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return { id: res.body.account.id, token: res.body.api_key.token }
}

export interface HarnessOptions {
  /** Config overrides (environment variable names), e.g. `{ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }`. */
  env?: Record<string, string | undefined>
  /**
   * false: `call` goes through `app.handle` (see appClient), which spares a socket per request. Keep
   * the default for POST /v1/validate, connection or drain behaviour, and the fast path's access log.
   */
  socket?: boolean
}

export async function startHarness(overrides: Record<string, string | undefined> = {}, opts: { socket?: boolean } = {}): Promise<Harness> {
  const db = await freshDatabase()
  const config = testConfig(overrides, db.url)
  const node = await startNode(config, { db: db.url ? undefined : await db.open(), log: createLogger(config.logLevel) })
  const call = opts.socket === false ? appClient(node) : client(node.url)
  return {
    node,
    db,
    config,
    call,
    account: (plan = 'growth') => createAccount(call, plan),
    async close() {
      await node.stop()
      await db.drop()
    },
  }
}

/**
 * The preamble of a test file: a fresh database and node before the file's tests (beforeAll), both
 * gone after them (afterAll). Returns the harness at once; its members are usable from the first
 * test (and from hooks registered after this call).
 */
export function useHarness(options: HarnessOptions = {}): Harness {
  let h: Harness | null = null
  beforeAll(async () => {
    h = await startHarness(options.env, { socket: options.socket })
  }, 180_000) // a fresh database and node: over a minute when the shared machine is busy
  afterAll(() => h?.close())
  const started = (): Harness => {
    if (!h) throw new Error('useHarness: the harness is used before its beforeAll ran')
    return h
  }
  return {
    get node() {
      return started().node
    },
    get db() {
      return started().db
    },
    get config() {
      return started().config
    },
    call: (method, path, opts) => started().call(method, path, opts),
    account: (plan) => started().account(plan),
    close: () => started().close(),
  }
}

/** Creates an API key of `scope` in the account of `token`. */
export async function scopedToken(call: Client, token: string, scope: string): Promise<string> {
  const res = await call('POST', '/v1/api-keys', { token, body: { name: scope, scope } })
  if (res.status !== 201) throw new Error(`api key creation failed: ${res.status}`)
  return res.body.token
}

export async function newProduct(call: Client, token: string, slug = `p-${Math.random().toString(36).slice(2, 10)}`) {
  const res = await call('POST', '/v1/products', { token, body: { name: slug, slug } })
  if (res.status !== 201) throw new Error(`product creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

export async function newKey(call: Client, token: string, productId: string, extra: Record<string, unknown> = {}) {
  const res = await call('POST', '/v1/keys', { token, body: { product_id: productId, ...extra } })
  if (res.status !== 201) throw new Error(`key creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

/** A random device fingerprint: 64 hex characters. */
export const fingerprint = () => randomBytes(32).toString('hex')

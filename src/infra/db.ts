// The `Db` adapter: postgres.js against DATABASE_URL, or embedded PGlite served over a local socket so
// the very same postgres.js code path runs in both modes.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { DEFAULT_SOCKET_POLICY, socketFactory } from './pg-socket'

export type Sql = postgres.Sql
export type Tx = postgres.TransactionSql

export interface Db {
  readonly sql: Sql
  readonly kind: 'postgres' | 'embedded'
  /** Cheap liveness probe for /readyz; false when down or slower than `timeoutMs`. */
  ping(timeoutMs?: number): Promise<boolean>
  /**
   * Calls `onNotify` for each NOTIFY on `channel` (sent at commit). Best effort: a wake-up hint, not a
   * queue, so callers keep a polling fallback. Resolves to an unsubscribe function.
   */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>
  close(): Promise<void>
}

const pgOptions = {
  onnotice: () => {},
  connect_timeout: 5,
  idle_timeout: 60,
  // postgres.js waits 3^n/100 s (up to 20 s) before reconnecting after n failures, and queued queries
  // wait with it: an outage would turn into 20 s hangs instead of fast 503s, and recovery would lag.
  // Retry quickly instead (a refused connection costs nothing); at most a quarter second apart.
  backoff: (retries: number) => Math.min(0.02 * 2 ** retries, 0.25),
  // Dates come back as Date; ids/enums are text; counts are cast to int in SQL.
} satisfies postgres.Options<{}>

/**
 * External Postgres. The pool opens connections before load needs them and keeps them: postgres.js
 * opens a connection only when every open one is busy (a ramp of load, the machine saturated, a
 * backend slow to start), and a connection that idled out was exactly such a future storm of connects.
 * So: no idle timeout (connections still recycle after max_lifetime, 30 to 60 min), a warm floor of
 * connections opened at start and re-opened off the request path, and pg-socket.ts's connect policy
 * (a silent new connection is retried, an endpoint that accepts and closes fails fast).
 */
const WARM_CONNECTIONS = 5
const KEEP_WARM_MS = 30_000
const FIRST_WARM_MS = 2_000
const externalOptions = {
  idle_timeout: 0,
  // Bounds the startup after the server's first byte (authentication, ready); the socket policy's
  // own startup wait (5 s) decides first whether a silent attempt is retried or fails.
  connect_timeout: 10,
}

/** Runs `n` concurrent trivial queries soon after start and every KEEP_WARM_MS: each takes an open connection or opens one. */
function keepWarm(sql: Sql, n: number): () => void {
  let running = false
  const warm = async () => {
    if (running) return
    running = true
    await Promise.all(Array.from({ length: n }, () => sql`select 1`.catch(() => {}))).finally(() => (running = false))
  }
  // The first round once startup (migrations) is through, so it does not compete with it.
  const first = setTimeout(warm, FIRST_WARM_MS)
  const timer = setInterval(warm, KEEP_WARM_MS)
  first.unref?.()
  timer.unref?.()
  return () => (clearTimeout(first), clearInterval(timer))
}

type Listen = Db['listen']

/** What a transaction begun with a Db's `sql.begin` runs once it has ended (see afterCommit). */
interface Ending {
  pool: Sql
  committed: (() => void)[]
  rolledBack: (() => void)[]
}
const endings = new WeakMap<object, Ending>()

/**
 * Runs `onCommit` once the transaction `tx` has committed, or `onRollback` once it has not (its callback
 * or one of its statements failed, or COMMIT did). Both run after `sql.begin` has settled, before it
 * returns to its caller; an exception in either is swallowed. Only for a transaction begun with a Db's
 * `sql.begin`: a savepoint's scope (`tx.savepoint`) or any other Sql gives false, and nothing is
 * registered (the caller does without).
 *
 * Settled means postgres.js settled: `begin` resolves only when COMMIT succeeded and no statement of the
 * transaction failed. A connection lost while COMMIT was under way rejects it though the commit may have
 * happened, so `onRollback` must be safe in that case too.
 */
export function afterCommit(tx: Tx, onCommit: () => void, onRollback: () => void): boolean {
  const ending = endings.get(tx)
  if (!ending) return false
  ending.committed.push(onCommit)
  ending.rolledBack.push(onRollback)
  return true
}

/** The Db's Sql (pool) that began `tx` with `sql.begin`; undefined as for afterCommit. */
export const poolOf = (tx: Tx): Sql | undefined => endings.get(tx)?.pool

/** Makes `sql.begin` record each transaction's ending, for afterCommit. */
function trackEndings(sql: Sql): void {
  type Begin = (options: string, fn: (tx: Tx) => unknown) => Promise<unknown>
  const begin = (sql.begin as unknown as Begin).bind(sql)
  const run = (fns: (() => void)[]) => {
    for (const fn of fns) {
      try {
        fn()
      } catch {
        // a hook must not turn a settled transaction into an error
      }
    }
  }
  const tracked = async (a: unknown, b?: unknown) => {
    const [options, fn] = (typeof a === 'function' ? ['', a] : [a, b]) as [string, (tx: Tx) => unknown]
    let ending: Ending | undefined
    let result: unknown
    try {
      result = await begin(options, (tx) => {
        ending = { pool: sql, committed: [], rolledBack: [] }
        endings.set(tx, ending)
        return fn(tx)
      })
    } catch (err) {
      if (ending) run(ending.rolledBack)
      throw err
    }
    if (ending) run(ending.committed)
    return result
  }
  Object.assign(sql, { begin: tracked })
}

function wrap(sql: Sql, kind: Db['kind'], listen: Listen, onClose: () => Promise<void> = async () => {}): Db {
  trackEndings(sql)
  return {
    sql,
    kind,
    listen,
    async ping(timeoutMs = 1000) {
      // A server that accepts and then stalls must read as down, not hang the readiness probe.
      let timer: ReturnType<typeof setTimeout> | undefined
      const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))
      const probe = sql`select 1`.then(
        () => true,
        () => false,
      )
      try {
        return await Promise.race([probe, timeout])
      } finally {
        clearTimeout(timer)
      }
    },
    async close() {
      await sql.end({ timeout: 5 })
      await onClose()
    },
  }
}

export function connectPostgres(url: string, max = 10, socketPolicy = DEFAULT_SOCKET_POLICY): Db {
  const untyped = { socket: socketFactory(socketPolicy) } as {} // a postgres.js option missing from its type definitions
  const sql = postgres(url, { ...pgOptions, ...externalOptions, max, ...untyped })
  const stopWarming = keepWarm(sql, Math.min(max, WARM_CONNECTIONS))
  // postgres.js keeps LISTEN on a dedicated connection and re-listens after a reconnect.
  const listen: Listen = async (channel, onNotify) => {
    const { unlisten } = await sql.listen(channel, () => onNotify())
    return async () => void (await unlisten())
  }
  return wrap(sql, 'postgres', listen, async () => stopWarming())
}

/**
 * Embedded Postgres (PGlite) persisted under `dataDir` (or in memory when dataDir is null), reached
 * through pglite-socket. PGlite is single-session, so the pool holds one connection: transactions
 * never interleave.
 */
export async function startEmbedded(dataDir: string | null): Promise<Db> {
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
  let dir: string | undefined
  if (dataDir) {
    mkdirSync(dataDir, { recursive: true })
    dir = join(dataDir, 'pgdata')
  }
  const pglite = await createPglite(dir)
  const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 1 })
  await server.start()
  const [host, port] = server.getServerConn().split(':')
  // PGlite has one session and the pool one connection: LISTEN on it, and PGlite delivers the session's
  // own NOTIFYs to it at commit.
  const listeners = new Map<string, Set<() => void>>()
  const onnotify = (channel: string) => listeners.get(channel)?.forEach((fn) => fn())
  const untyped = { onnotify } as {} // a postgres.js option missing from its type definitions
  const sql = postgres({ ...pgOptions, host, port: Number(port), database: 'postgres', username: 'postgres', max: 1, ...untyped })
  const listen: Listen = async (channel, onNotify) => {
    let set = listeners.get(channel)
    if (!set) {
      listeners.set(channel, (set = new Set()))
      await sql.unsafe(`listen "${channel.replaceAll('"', '""')}"`)
    }
    set.add(onNotify)
    return async () => void set.delete(onNotify)
  }
  return wrap(sql, 'embedded', listen, async () => {
    await server.stop()
    await pglite.close()
  })
}

/**
 * A PGlite with the extensions the migrations create: pg_trgm, for the key search's trigram index
 * (sql/038_customers.sql). Every embedded store (and a test's own PGlite) opens through here.
 */
export async function createPglite(dir?: string) {
  const { PGlite } = await import('@electric-sql/pglite')
  const { pg_trgm } = await import('@electric-sql/pglite/contrib/pg_trgm')
  return PGlite.create(dir, { extensions: { pg_trgm } })
}

/** True for errors that mean "the database is unreachable" rather than "the query was wrong". */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; errno?: string } | null
  if (!e || typeof e !== 'object') return false
  const code = e.code ?? e.errno ?? ''
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED',
      'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'ConnectionRefused'].includes(code) ||
    code.startsWith('08') || code === '57P01' || code === '57P03'
  )
}

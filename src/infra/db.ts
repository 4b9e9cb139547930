// The `Db` adapter: postgres.js against DATABASE_URL, or embedded PGlite served over a local socket so
// the very same postgres.js code path runs in both modes.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'

export type Sql = postgres.Sql
export type Tx = postgres.TransactionSql

export interface Db {
  readonly sql: Sql
  readonly kind: 'postgres' | 'embedded'
  /** Cheap liveness probe for /readyz. */
  ping(): Promise<boolean>
  close(): Promise<void>
}

const pgOptions = {
  onnotice: () => {},
  connect_timeout: 5,
  idle_timeout: 60,
  // Dates come back as Date; ids/enums are text; counts are cast to int in SQL.
} satisfies postgres.Options<{}>

function wrap(sql: Sql, kind: Db['kind'], onClose: () => Promise<void> = async () => {}): Db {
  return {
    sql,
    kind,
    async ping() {
      try {
        await sql`select 1`
        return true
      } catch {
        return false
      }
    },
    async close() {
      await sql.end({ timeout: 5 })
      await onClose()
    },
  }
}

export function connectPostgres(url: string, max = 10): Db {
  return wrap(postgres(url, { ...pgOptions, max }), 'postgres')
}

/**
 * Embedded Postgres (PGlite) persisted under `dataDir` (or in memory when dataDir is null), reached
 * through pglite-socket. PGlite is single-session, so the pool holds one connection: transactions
 * never interleave.
 */
export async function startEmbedded(dataDir: string | null): Promise<Db> {
  const { PGlite } = await import('@electric-sql/pglite')
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket')
  let dir: string | undefined
  if (dataDir) {
    mkdirSync(dataDir, { recursive: true })
    dir = join(dataDir, 'pgdata')
  }
  const pglite = await PGlite.create(dir)
  const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 1 })
  await server.start()
  const [host, port] = server.getServerConn().split(':')
  const sql = postgres({ ...pgOptions, host, port: Number(port), database: 'postgres', username: 'postgres', max: 1 })
  return wrap(sql, 'embedded', async () => {
    await server.stop()
    await pglite.close()
  })
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

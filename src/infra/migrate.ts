// Numbered SQL files in sql/, applied in order, each in its own transaction, recorded in a table.
// An advisory lock makes concurrent starts (several nodes at once) apply each file exactly once.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Sql } from './db'

const SQL_DIR = join(import.meta.dir, '..', '..', 'sql')
const LOCK_ID = 7_202_611 // arbitrary, fixed: "keyward migrations"

export function migrationFiles(): string[] {
  return readdirSync(SQL_DIR)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
}

/**
 * Applies the pending files in order; with `until`, only those up to and including that file (a restore
 * loads a backup at its own schema, then applies the rest: infra/backup.ts).
 */
export async function migrate(sql: Sql, opts: { until?: string } = {}): Promise<string[]> {
  // Under the lock too: `create table if not exists` is not safe against a concurrent twin (nodes of
  // a fresh cluster starting at once fail with a duplicate pg_type row).
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK_ID})`
    await tx`create table if not exists schema_migrations (
      version text primary key, applied_at timestamptz not null default now())`
  })
  const applied: string[] = []
  for (const file of migrationFiles()) {
    if (opts.until !== undefined && file > opts.until) break
    await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${LOCK_ID})`
      const [done] = await tx`select 1 from schema_migrations where version = ${file}`
      if (done) return
      await tx.unsafe(readFileSync(join(SQL_DIR, file), 'utf8'))
      await tx`insert into schema_migrations (version) values (${file})`
      applied.push(file)
    })
  }
  return applied
}

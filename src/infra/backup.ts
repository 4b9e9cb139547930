// `bun run keyward backup FILE` / `restore FILE` (docs/operations.md, "Backup and restore").
//
// One portable file for both stores: a logical dump, every row as Postgres's own JSON of it
// (`to_jsonb(row)::text`, never parsed here, so bigints, numerics, bytea and arrays keep their exact
// value), table by table in foreign-key order. A backup of the embedded store restores into Postgres
// and the other way round.
//
// Postgres: every table is read in ONE read-only REPEATABLE READ transaction, so the file is one
// consistent snapshot while the nodes keep serving (writes go on beside it; none is half in the file).
// The embedded store is one process's: the node is stopped first (as for every CLI command on it).
//
// The file: a header line `#{"format":"keyward-backup",...}`, then per table a line `#{"table":...}`
// and one line per row (`{...}`), and a last line `#{"end":true,"rows":{...}}` (a truncated file is
// refused). The header has the migrations the data was written under and a value sealed with the
// source's SECRET_KEY: signing keys' private halves, webhook and connector secrets are sealed with it,
// so a restore under another SECRET_KEY is refused before anything is written.
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Sql } from './db'
import { migrate, migrationFiles } from './migrate'
import { open, seal } from './crypto'

export const BACKUP_FORMAT = 'keyward-backup'
export const BACKUP_VERSION = 1
const CHECK_TEXT = 'keyward-backup-secret-check'

/** Tables that are not data: the migrations' own record and the cluster's live membership and name. */
const NOT_DATA = new Set(['schema_migrations', 'cluster_nodes', 'cluster_identity'])

export class BackupError extends Error {}

interface Header {
  format: string
  version: number
  created_at: string
  store: 'postgres' | 'embedded'
  migrations: string[]
  secret_check: string
}

const q = (name: string) => `"${name.replaceAll('"', '""')}"`

/** The data tables of the public schema, parents before children (foreign keys), then by name. */
export async function dataTables(sql: Sql): Promise<string[]> {
  const tables = (await sql<{ name: string }[]>`
    select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') order by c.relname`).map((r) => r.name).filter((t) => !NOT_DATA.has(t))
  const edges = await sql<{ child: string; parent: string }[]>`
    select c.relname as child, p.relname as parent from pg_constraint k
    join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
    join pg_namespace n on n.oid = c.relnamespace
    where k.contype = 'f' and n.nspname = 'public' and k.conrelid <> k.confrelid`
  const parents = new Map(tables.map((t) => [t, new Set<string>()]))
  for (const e of edges) if (parents.has(e.child) && parents.has(e.parent)) parents.get(e.child)!.add(e.parent)
  const out: string[] = []
  const done = new Set<string>()
  while (out.length < tables.length) {
    const ready = tables.filter((t) => !done.has(t) && [...parents.get(t)!].every((p) => done.has(p)))
    if (ready.length === 0) throw new BackupError(`foreign keys form a cycle among: ${tables.filter((t) => !done.has(t)).join(', ')}`)
    for (const t of ready) {
      out.push(t)
      done.add(t)
    }
  }
  return out
}

async function columnsOf(sql: Sql, table: string): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`
    select a.attname as name from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relname = ${table} and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
    order by a.attnum`
  return rows.map((r) => r.name)
}

/** Writes a backup of `sql` to `file`; answers the rows written per table. */
export async function backup(
  sql: Sql,
  file: string,
  opts: { store: 'postgres' | 'embedded'; secretKey: Uint8Array },
): Promise<Record<string, number>> {
  const writer = Bun.file(file).writer({ highWaterMark: 1 << 20 })
  const counts: Record<string, number> = {}
  try {
    await sql.begin('isolation level repeatable read read only', async (tx) => {
      const [made] = await tx`select 1 from pg_class where relname = 'schema_migrations' and relkind = 'r'`
      if (!made) throw new BackupError('this store holds no Keyward data yet (no migration was ever applied): nothing to back up')
      const migrations = (await tx<{ version: string }[]>`select version from schema_migrations order by version`).map((r) => r.version)
      const header: Header = {
        format: BACKUP_FORMAT,
        version: BACKUP_VERSION,
        created_at: new Date().toISOString(),
        store: opts.store,
        migrations,
        secret_check: seal(opts.secretKey, CHECK_TEXT),
      }
      writer.write(`#${JSON.stringify(header)}\n`)
      for (const table of await dataTables(tx as unknown as Sql)) {
        const columns = await columnsOf(tx as unknown as Sql, table)
        writer.write(`#${JSON.stringify({ table, columns })}\n`)
        let n = 0
        const cursor = tx.unsafe(`select to_jsonb(t)::text as j from ${q(table)} t`).cursor(1000) as AsyncIterable<{ j: string }[]>
        for await (const rows of cursor) {
          for (const r of rows) writer.write(r.j + '\n')
          n += rows.length
          await writer.flush()
        }
        counts[table] = n
      }
    })
    writer.write(`#${JSON.stringify({ end: true, rows: counts })}\n`)
  } finally {
    await writer.end()
  }
  return counts
}

/** Reads a backup file's lines: the header, then table sections, checking the end line is there. */
async function* readLines(file: string): AsyncGenerator<string> {
  const rl = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity })
  for await (const line of rl) if (line !== '') yield line
}

function parseMeta<T>(line: string, what: string): T {
  if (!line.startsWith('#')) throw new BackupError(`not a Keyward backup: expected ${what}`)
  try {
    return JSON.parse(line.slice(1)) as T
  } catch {
    throw new BackupError(`not a Keyward backup: ${what} is not JSON`)
  }
}

/** The header of a backup file, checked (format, version, complete file). */
export async function readHeader(file: string): Promise<Header & { rows: Record<string, number> }> {
  let header: Header | null = null
  let last = ''
  for await (const line of readLines(file)) {
    if (!header) {
      header = parseMeta<Header>(line, 'a header line')
      if (header.format !== BACKUP_FORMAT) throw new BackupError('not a Keyward backup (its first line says another format)')
      if (header.version !== BACKUP_VERSION) throw new BackupError(`a backup of format version ${header.version}: this Keyward reads version ${BACKUP_VERSION}`)
    }
    last = line
  }
  if (!header) throw new BackupError('the file is empty')
  const end = last.startsWith('#') ? parseMeta<{ end?: boolean; rows?: Record<string, number> }>(last, 'the end line') : null
  if (!end?.end) throw new BackupError('the backup is incomplete (its end line is missing): it was cut short while written or copied')
  return { ...header, rows: end.rows ?? {} }
}

/** Rows in the data tables of `sql` (the refusal of a restore over data names them). */
export async function tablesWithRows(sql: Sql): Promise<string[]> {
  const out: string[] = []
  for (const t of await dataTables(sql)) {
    const [row] = await sql.unsafe(`select 1 from ${q(t)} limit 1`)
    if (row) out.push(t)
  }
  return out
}

/**
 * Restores `file` into `sql`, in one transaction: all of it or nothing. The schema is brought to the
 * backup's migrations first, the rows loaded, then this Keyward's remaining migrations run over them
 * (so a later migration's backfill applies to restored rows as to any). Refused: a database holding
 * data (unless `force`: its data tables are emptied first), a backup of a newer Keyward, another
 * SECRET_KEY.
 */
export async function restore(
  sql: Sql,
  file: string,
  opts: { secretKey: Uint8Array; force?: boolean },
): Promise<{ rows: Record<string, number>; migrated: string[] }> {
  const header = await readHeader(file)
  try {
    if (open(opts.secretKey, header.secret_check).toString() !== CHECK_TEXT) throw new Error('mismatch')
  } catch {
    throw new BackupError(
      'this backup was made under another SECRET_KEY: its sealed values (signing keys, webhook and connector secrets) would not open. ' +
        'Set SECRET_KEY to the one of the installation it comes from (embedded store: its DATA_DIR/secret.key)',
    )
  }
  const known = new Set(migrationFiles())
  const newer = header.migrations.filter((m) => !known.has(m))
  if (newer.length) throw new BackupError(`this backup is of a newer Keyward (migrations ${newer.join(', ')}): restore it with that version or later`)
  const until = header.migrations.at(-1)
  await migrate(sql, until ? { until } : {})
  const busy = await tablesWithRows(sql)
  if (busy.length && !opts.force) {
    throw new BackupError(`the database is not empty (rows in ${busy.slice(0, 5).join(', ')}${busy.length > 5 ? ', …' : ''}): restore into an empty one, or pass --force to replace its data`)
  }
  const rows: Record<string, number> = {}
  await sql.begin(async (tx) => {
    const tables = await dataTables(tx as unknown as Sql)
    const here = new Set(tables)
    if (opts.force && busy.length) await tx.unsafe(`truncate ${tables.map(q).join(', ')} restart identity cascade`)
    // Triggers keep derived tables (analytics counts) and notify the nodes: the derived rows are in
    // the file, and nothing is announced while restoring. Foreign keys stay checked.
    for (const t of tables) await tx.unsafe(`alter table ${q(t)} disable trigger user`)
    let table: string | null = null
    let columns: string[] = []
    let batch: string[] = []
    const flush = async () => {
      if (!table || batch.length === 0) return
      const cols = columns.map(q).join(', ')
      await tx.unsafe(
        `insert into ${q(table)} (${cols}) overriding system value select ${cols} from jsonb_populate_recordset(null::${q(table)}, $1::text::jsonb)`,
        [`[${batch.join(',')}]`],
      )
      rows[table] = (rows[table] ?? 0) + batch.length
      batch = []
    }
    let first = true
    for await (const line of readLines(file)) {
      if (first) {
        first = false
        continue
      }
      if (line.startsWith('#')) {
        await flush()
        const meta = parseMeta<{ table?: string; columns?: string[]; end?: boolean }>(line, 'a table line')
        if (meta.end) break
        if (!meta.table || !Array.isArray(meta.columns)) throw new BackupError('not a Keyward backup: a table line without its table')
        if (!here.has(meta.table)) throw new BackupError(`the backup has a table this Keyward does not know: ${meta.table}`)
        table = meta.table
        // Columns a later migration dropped are left out; new ones take their defaults.
        const present = new Set(await columnsOf(tx as unknown as Sql, table))
        columns = meta.columns.filter((c) => present.has(c))
        rows[table] = 0
        continue
      }
      if (!table) throw new BackupError('not a Keyward backup: a row before its table line')
      batch.push(line)
      if (batch.length >= 500) await flush()
    }
    await flush()
    for (const t of tables) await tx.unsafe(`alter table ${q(t)} enable trigger user`)
    // Serial and identity columns continue after the restored values.
    const seqs = await tx<{ tbl: string; col: string; seq: string }[]>`
      select c.relname as tbl, a.attname as col, pg_get_serial_sequence(quote_ident(c.relname), a.attname) as seq
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and c.relkind = 'r' and a.attnum > 0 and not a.attisdropped
        and pg_get_serial_sequence(quote_ident(c.relname), a.attname) is not null`
    for (const s of seqs) {
      if (!here.has(s.tbl)) continue
      await tx.unsafe(`select setval($1::regclass, coalesce((select max(${q(s.col)}) from ${q(s.tbl)}), 0) + 1, false)`, [s.seq])
    }
    // What the end line counted is what was loaded, or nothing is kept.
    for (const [t, n] of Object.entries(header.rows)) {
      if ((rows[t] ?? 0) !== n) throw new BackupError(`table ${t}: ${rows[t] ?? 0} rows read of the ${n} the backup counted`)
    }
  })
  const migrated = await migrate(sql)
  return { rows, migrated }
}

import type { JSONValue } from 'postgres'
import type { Sql, Tx } from '../../infra/db'
import { iso } from '../../core/values'
import type { RefillRule } from '../../core/credits'
import { KEY_SETTINGS, type SettingValues } from '../../core/key-settings'
import type { Policy } from './model'

type Row = Omit<Policy, 'created_at' | 'updated_at'> & { created_at: Date; updated_at: Date }

const toPolicy = (r: Row): Policy => ({ ...r, created_at: iso(r.created_at)!, updated_at: iso(r.updated_at)! })

type Setting = (typeof KEY_SETTINGS)[number]

/** Fragments joined by commas. */
const commaList = (sql: Sql | Tx, parts: ReturnType<Sql>[]) => parts.slice(1).reduce((all, part) => sql`${all}, ${part}`, parts[0]!)

/** Each setting's column of `settings` (core/key-settings.ts), `p.` (or another prefix) before it: a select list. */
export const settingColumns = (sql: Sql | Tx, settings: readonly Setting[] = KEY_SETTINGS, prefix = '') =>
  commaList(sql, settings.map((s) => (prefix ? sql`${sql(prefix)}.${sql(s.column)}` : sql`${sql(s.column)}`)))

/** A setting's value as a parameter: the map as jsonb. */
const param = (sql: Sql | Tx, s: Setting, value: unknown) => (s.inherit === 'merged' ? sql.json(value as JSONValue) : (value as string | number | boolean | null))

/** The values of `settings` in `values` (by field), in the order of settingColumns: an insert's values. */
export const settingParams = (sql: Sql | Tx, values: object, settings: readonly Setting[] = KEY_SETTINGS) =>
  commaList(sql, settings.map((s) => sql`${param(sql, s, (values as Record<string, unknown>)[s.field])}`))

/** `column = value` for each of `settings`: an update's set list. */
export const settingAssignments = (sql: Sql | Tx, values: object, settings: readonly Setting[] = KEY_SETTINGS) =>
  commaList(sql, settings.map((s) => sql`${sql(s.column)} = ${param(sql, s, (values as Record<string, unknown>)[s.field])}`))

const columns = (sql: Sql | Tx) => sql`p.id, p.product_id, p.name, ${settingColumns(sql, KEY_SETTINGS, 'p')}, p.duration, p.expiry_basis,
  p.credits, p.metadata, (select count(*)::int from license_keys k where k.policy_id = p.id) as keys, p.created_at, p.updated_at`

/**
 * The settings a policy gives its keys (what validate and the key object merge): the inherited ones of
 * core/key-settings.ts, and the term its new keys start with.
 */
export interface PolicySettings extends SettingValues {
  duration: string | null
  expiry_basis: 'creation' | 'first_activation'
}

export interface PolicyWrite extends PolicySettings {
  name: string
  /** copied into each key created afterwards */
  credits: { initial: number; refill: RefillRule | null } | null
  metadata: Record<string, unknown>
}

export async function insertPolicy(tx: Tx, p: PolicyWrite & { id: string; accountId: string; productId: string }): Promise<Policy> {
  await tx`insert into policies (id, account_id, product_id, name, ${settingColumns(tx)}, duration, expiry_basis, credits, metadata)
    values (${p.id}, ${p.accountId}, ${p.productId}, ${p.name}, ${settingParams(tx, p)}, ${p.duration}, ${p.expiry_basis},
      ${p.credits ? tx.json(p.credits as unknown as JSONValue) : null}, ${tx.json(p.metadata as JSONValue)})`
  return (await findPolicy(tx, p.accountId, p.id))!
}

export async function findPolicy(sql: Sql | Tx, accountId: string, id: string): Promise<Policy | null> {
  const [row] = await sql<Row[]>`select ${columns(sql)} from policies p where p.id = ${id} and p.account_id = ${accountId}`
  return row ? toPolicy(row) : null
}

/**
 * The writable fields alone (what a PATCH compares against): without the `keys` count, which reads
 * every key of the policy, so an edit's cost does not grow with the keys it governs.
 */
export async function findPolicyWrite(tx: Tx, id: string): Promise<PolicyWrite | null> {
  const [row] = await tx<PolicyWrite[]>`select name, ${settingColumns(tx)}, duration, expiry_basis, credits, metadata
    from policies where id = ${id}`
  return row ?? null
}

/** Locks a policy row (edits and deletes; key creation takes it `for share`). */
export async function lockPolicy(tx: Tx, accountId: string, id: string, mode: 'update' | 'share'): Promise<{ product_id: string } | null> {
  const [row] =
    mode === 'update'
      ? await tx<{ product_id: string }[]>`select product_id from policies where id = ${id} and account_id = ${accountId} for update`
      : await tx<{ product_id: string }[]>`select product_id from policies where id = ${id} and account_id = ${accountId} for share`
  return row ?? null
}

export async function listPolicies(sql: Sql, accountId: string, productId: string | undefined): Promise<Policy[]> {
  const rows = await sql<Row[]>`select ${columns(sql)} from policies p where p.account_id = ${accountId}
    ${productId !== undefined ? sql`and p.product_id = ${productId}` : sql``}
    order by p.created_at, p.id`
  return rows.map(toPolicy)
}

export async function updatePolicy(tx: Tx, id: string, p: PolicyWrite): Promise<void> {
  await tx`update policies set name = ${p.name}, ${settingAssignments(tx, p)}, duration = ${p.duration}, expiry_basis = ${p.expiry_basis},
      credits = ${p.credits ? tx.json(p.credits as unknown as JSONValue) : null}, metadata = ${tx.json(p.metadata as JSONValue)}, updated_at = now()
    where id = ${id}`
}

/**
 * The copy of release_after_seconds on the active activations of the policy's keys that inherit it
 * (the inactivity job's index needs it on the activation row): one statement, whatever the count.
 */
export async function copyReleaseAfter(tx: Tx, policyId: string, releaseAfterSeconds: number | null): Promise<void> {
  await tx`update activations a set release_after_seconds = ${releaseAfterSeconds}
    from license_keys k
    where k.policy_id = ${policyId} and not ('release_after_seconds' = any(k.own_fields))
      and a.key_id = k.id and a.status = 'active'`
}

export async function hasKeys(tx: Tx, id: string): Promise<boolean> {
  const rows = await tx`select 1 from license_keys where policy_id = ${id} limit 1`
  return rows.length > 0
}

export async function deletePolicy(tx: Tx, id: string): Promise<void> {
  await tx`delete from policies where id = ${id}`
}

/** The settings of one policy, any account (validate's policy cache). */
export async function loadPolicySettings(sql: Sql, id: string): Promise<PolicySettings | null> {
  const [row] = await sql<PolicySettings[]>`select ${settingColumns(sql)}, duration, expiry_basis from policies where id = ${id}`
  return row ?? null
}

/** Joins a key `k` to its policy `p` (none: p's columns are null). */
export const joinPolicy = (sql: Sql | Tx) => sql`left join policies p on p.id = k.policy_id`

/** One of the settings a key may set itself: its own value when it does (or has no policy), else the policy's. */
const own = (sql: Sql | Tx, column: string) =>
  sql`case when k.policy_id is null or ${column} = any(k.own_fields) then k.${sql(column)} else p.${sql(column)} end`

/** The effective plan of `k` (for filters). */
export const effectivePlan = (sql: Sql | Tx) => own(sql, 'plan')

/** A default as an SQL literal: the table's constants only (numbers, words, booleans, `{}`), never input. */
function literal(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  if (typeof value === 'string' && /^[a-z_]+$/.test(value)) return `'${value}'`
  if (typeof value === 'object' && Object.keys(value).length === 0) return `'{}'`
  throw new Error(`no SQL literal for the default ${JSON.stringify(value)}`)
}

/** One inherited setting of `k` over `p`, by the rule core/key-settings.ts names for it. */
function effectiveColumn(sql: Sql | Tx, s: (typeof KEY_SETTINGS)[number]) {
  const c = sql(s.column)
  switch (s.inherit) {
    case 'flagged':
      return sql`${own(sql, s.column)} as ${sql(s.field)}`
    case 'nullable':
      return sql`coalesce(k.${c}, p.${c}, ${sql.unsafe(literal(s.default))}) as ${sql(s.field)}`
    case 'merged':
      return sql`jsonb_strip_nulls(coalesce(p.${c}, ${sql.unsafe(literal(s.default))}) || k.${c}) as ${sql(s.field)}`
    case 'policy':
      return sql`coalesce(p.${c}, ${sql.unsafe(literal(s.default))}) as ${sql(s.field)}`
  }
}

/**
 * The effective settings of key `k` joined to its policy `p` (joinPolicy), generated from the table in
 * core/key-settings.ts (which states the same rule as `effective`): the key's own value, else the
 * policy's, else the default; entitlements are the policy's map with the key's own merged over it,
 * nulls removed.
 */
export const effectiveSettings = (sql: Sql | Tx) => {
  const parts = KEY_SETTINGS.map((s) => effectiveColumn(sql, s))
  return parts.slice(1).reduce((all, part) => sql`${all}, ${part}`, parts[0]!)
}

/** Whether validate refuses `k` for its expiry (past expires_at + grace, not kept), with its policy's terms. */
export const expiryRefused = (sql: Sql | Tx) =>
  sql`key_expiry_refused(k.expires_at, coalesce(k.grace_seconds, p.grace_seconds), coalesce(k.after_expiry, p.after_expiry))`

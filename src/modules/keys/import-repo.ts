// The SQL of an import: what the account holds (products, policies, external ids, values), and the
// rows written in three statements whatever their number (keys, activations, hash-only values), each
// one JSON parameter unpacked by Postgres (a multi-row VALUES would run out of parameters at 10,000 rows).
import type { JSONValue } from 'postgres'
import type { RefillRule } from '../../core/credits'
import type { Tx } from '../../infra/db'
import type { Catalog, CatalogPolicy, ImportSettings } from './import-rows'

export async function loadCatalog(tx: Tx, accountId: string): Promise<Catalog> {
  // `for share`: a concurrent product or policy delete waits for this import, then sees its keys
  const products = await tx<{ id: string; slug: string }[]>`select id, slug from products where account_id = ${accountId} for share`
  const policies = await tx<(CatalogPolicy & { id: string })[]>`select id, product_id, activation_limit, release_after_seconds, duration,
      expiry_basis, credits from policies where account_id = ${accountId} for share`
  return {
    productIds: new Set(products.map((p) => p.id)),
    productBySlug: new Map(products.map((p) => [p.slug, p.id])),
    policies: new Map(policies.map(({ id, ...p }) => [id, p])),
  }
}

export async function existingExternalIds(tx: Tx, accountId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set()
  const rows = await tx<{ external_id: string }[]>`select external_id from license_keys
    where account_id = ${accountId} and external_id = any(${ids}::text[])`
  return new Set(rows.map((r) => r.external_id))
}

/** Which of these stored hashes exist, with the account holding each. */
export async function existingHashes(tx: Tx, hashes: string[]): Promise<Map<string, string>> {
  if (hashes.length === 0) return new Map()
  const rows = await tx<{ key_hash: string; account_id: string }[]>`select key_hash, account_id from license_keys
    where key_hash = any(${hashes}::text[])`
  return new Map(rows.map((r) => [r.key_hash, r.account_id]))
}

/** Which of these SHA-256 values wait in the account's hash-only imports. */
export async function existingSha256(tx: Tx, accountId: string, digests: string[]): Promise<Set<string>> {
  if (digests.length === 0) return new Set()
  const rows = await tx<{ sha256: string }[]>`select sha256 from key_sha256_imports
    where account_id = ${accountId} and sha256 = any(${digests}::text[])`
  return new Set(rows.map((r) => r.sha256))
}

/** A key row as the import writes it: its own settings as the table has them (core/key-settings.ts, ImportSettings), and the rest. */
export interface KeyInsert extends Omit<ImportSettings, 'activation_limit'> {
  id: string
  account_id: string
  product_id: string
  key_hash: string
  portable_hash: string | null
  key_prefix: string
  external_id: string | null
  activation_limit: number
  expires_at: string | null
  status: 'active' | 'revoked'
  revoked_at: string | null
  revoke_reason: string | null
  suspended_at: string | null
  suspend_reason: string | null
  suspended_until: string | null
  metadata: Record<string, unknown>
  customer_email: string | null
  customer_name: string | null
  customer_external_id: string | null
  entitlements: Record<string, unknown>
  policy_id: string | null
  own_fields: string[]
  created_at: string
  pending_duration: string | null
  /** null = unmetered */
  credits_remaining: number | null
  credits_refill: RefillRule | null
  /** the refill period counts from here (null when unmetered) */
  credits_since: string | null
}

export interface ActivationInsert {
  id: string
  account_id: string
  key_id: string
  product_id: string
  device_fingerprint: string
  device_name: string | null
  app_version: string | null
  activated_at: string
  release_after_seconds: number | null
}

/**
 * Rows into `table` in one statement: the rows are one JSON parameter that Postgres reads with the
 * table's own column types (jsonb_populate_recordset), and the columns written are the rows' fields
 * (every row has the same), so no column list or type is spelled here. `extra`: columns set in SQL.
 */
async function insertRows(tx: Tx, table: 'license_keys' | 'activations', rows: readonly object[], extra: Record<string, 'now()'> = {}): Promise<void> {
  if (rows.length === 0) return
  const columns = Object.keys(rows[0]!)
  const extraNames = Object.keys(extra)
  const into = [...columns, ...extraNames]
  const values = [...columns.map((c) => tx`r.${tx(c)}`), ...extraNames.map(() => tx`now()`)]
  const list = values.slice(1).reduce((all, v) => tx`${all}, ${v}`, values[0]!)
  await tx`insert into ${tx(table)} (${tx(into)})
    select ${list} from jsonb_populate_recordset(null::${tx(table)}, ${tx.json(rows as unknown as JSONValue)}) as r`
}

export const insertKeys = (tx: Tx, keys: KeyInsert[]) => insertRows(tx, 'license_keys', keys, { updated_at: 'now()' })

export const insertActivations = (tx: Tx, rows: ActivationInsert[]) => insertRows(tx, 'activations', rows)

export async function insertSha256(tx: Tx, rows: { key_id: string; account_id: string; sha256: string }[]): Promise<void> {
  if (rows.length === 0) return
  await tx`insert into key_sha256_imports (key_id, account_id, sha256)
    select key_id, account_id, sha256 from jsonb_to_recordset(${tx.json(rows as unknown as JSONValue)}) as r(key_id text, account_id text, sha256 text)`
}

// The export's reads: one page of keys at a time in creation order (keyset: each page starts after
// the last key of the one before, so a page costs the same at key 1,000,000 as at key 1), and the
// active devices of a page's keys in one query.
import type { Sql } from '../../infra/db'
import type { Key, KeyStatus } from './model'
import { keyColumns, keyFrom, toKey } from './repo'
import { searchCondition } from './search'

export interface ExportFilter {
  productId?: string
  policyId?: string
  status?: KeyStatus
  /** [0-9A-Z] only (the route's pattern), so LIKE needs no escaping */
  keyPrefix?: string
  /** the list's search (search.ts) */
  q?: string
}

export interface ExportedKey {
  key: Key
  product_slug: string
  /** the portable hash (what validate derives from the value), or null for a hash-only import not yet validated */
  key_hash: string | null
  /** a hash-only import not yet validated: the SHA-256 it was imported with */
  key_sha256: string | null
  /**
   * for the keyset: created_at as Postgres writes it, to the microsecond, sent back as text (a Date,
   * or a parameter typed timestamptz, which postgres.js serialises through Date, rounds to the millisecond)
   */
  after: { createdAt: string; id: string }
}

export async function exportPage(sql: Sql, accountId: string, f: ExportFilter, after: ExportedKey['after'] | null, limit: number): Promise<ExportedKey[]> {
  const rows = await sql<any[]>`select ${keyColumns(sql)}, pr.slug as product_slug, s.sha256 as key_sha256,
      coalesce(k.portable_hash, k.key_hash) as export_hash, k.created_at::text as cursor_at
    from ${keyFrom(sql)} join products pr on pr.id = k.product_id left join key_sha256_imports s on s.key_id = k.id
    where k.account_id = ${accountId}
      ${f.productId !== undefined ? sql`and k.product_id = ${f.productId}` : sql``}
      ${f.policyId !== undefined ? sql`and k.policy_id = ${f.policyId}` : sql``}
      ${f.keyPrefix !== undefined ? sql`and k.key_prefix like ${f.keyPrefix + '%'}` : sql``}
      ${f.status !== undefined ? sql`and key_effective_status(k.status, k.expires_at, k.suspended_at) = ${f.status}` : sql``}
      ${f.q !== undefined ? sql`and ${searchCondition(sql, f.q)}` : sql``}
      ${after !== null ? sql`and (k.created_at, k.id) > (${after.createdAt}::text::timestamptz, ${after.id})` : sql``}
    order by k.created_at, k.id limit ${limit}`
  return rows.map((r) => ({
    key: toKey(r),
    product_slug: r.product_slug,
    key_hash: r.key_sha256 === null ? r.export_hash : null,
    key_sha256: r.key_sha256,
    after: { createdAt: r.cursor_at, id: r.id },
  }))
}

export interface ExportedDevice {
  key_id: string
  device_fingerprint: string
  device_name: string | null
  app_version: string | null
  activated_at: Date
}

export async function activeDevices(sql: Sql, keyIds: string[]): Promise<ExportedDevice[]> {
  if (keyIds.length === 0) return []
  return sql<ExportedDevice[]>`select key_id, device_fingerprint, device_name, app_version, activated_at from activations
    where key_id = any(${keyIds}::text[]) and status = 'active' order by key_id, activated_at, id`
}

import type { JSONValue } from 'postgres'
import type { Sql, Tx } from '../../infra/db'
import { iso } from '../../core/values'
import type { Key, KeyStatus } from './model'

type Row = {
  id: string
  product_id: string
  plan: string | null
  status: KeyStatus
  activation_limit: number
  activations_used: number
  expires_at: Date | null
  created_at: Date
  revoked_at: Date | null
  revoke_reason: string | null
  metadata: Record<string, unknown>
  key_prefix: string
  release_after_seconds: number | null
  deactivations_allowed: number | null
  deactivations_used: number
}

export const toKey = (r: Row): Key => ({
  id: r.id,
  product_id: r.product_id,
  plan: r.plan,
  status: r.status,
  activation_limit: r.activation_limit,
  activations_used: r.activations_used,
  expires_at: iso(r.expires_at),
  created_at: iso(r.created_at)!,
  revoked_at: iso(r.revoked_at),
  revoke_reason: r.revoke_reason,
  metadata: r.metadata,
  key_prefix: r.key_prefix,
  release_after_seconds: r.release_after_seconds,
  deactivations_allowed: r.deactivations_allowed,
  deactivations_used: r.deactivations_used,
})

/** The key columns with the effective status and the live activation count. */
export const keyColumns = (sql: Sql | Tx) => sql`
  k.id, k.product_id, k.plan,
  case when k.status = 'active' and k.expires_at <= now() then 'expired' else k.status end as status,
  k.activation_limit,
  (select count(*)::int from activations a where a.key_id = k.id and a.status = 'active') as activations_used,
  k.expires_at, k.created_at, k.revoked_at, k.revoke_reason, k.metadata, k.key_prefix,
  k.release_after_seconds, k.deactivations_allowed, k.deactivations_used`

export async function insertKey(
  tx: Tx,
  k: {
    id: string
    accountId: string
    productId: string
    keyHash: string
    keyPrefix: string
    plan: string | null
    activationLimit: number
    expiresAt: Date | null
    /** a JSON object (checked by checkMetadata) */
    metadata: Record<string, unknown>
    releaseAfterSeconds: number | null
    deactivationsAllowed: number | null
  },
): Promise<Key> {
  await tx`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, plan, activation_limit, expires_at, metadata,
      release_after_seconds, deactivations_allowed)
    values (${k.id}, ${k.accountId}, ${k.productId}, ${k.keyHash}, ${k.keyPrefix}, ${k.plan}, ${k.activationLimit},
            ${k.expiresAt}, ${tx.json(k.metadata as JSONValue)}, ${k.releaseAfterSeconds}, ${k.deactivationsAllowed})`
  return (await findKey(tx, k.accountId, k.id))!
}

export async function findKey(sql: Sql | Tx, accountId: string, id: string): Promise<Key | null> {
  const [row] = await sql<Row[]>`select ${keyColumns(sql)} from license_keys k where k.id = ${id} and k.account_id = ${accountId}`
  return row ? toKey(row) : null
}

/** Keys by id with their account (any account: for background jobs), in expiry order. */
export async function findKeysByIds(sql: Sql | Tx, ids: string[]): Promise<{ accountId: string; key: Key }[]> {
  const rows = await sql<(Row & { account_id: string })[]>`select ${keyColumns(sql)}, k.account_id from license_keys k
    where k.id in ${sql(ids)} order by k.expires_at, k.id`
  return rows.map((r) => ({ accountId: r.account_id, key: toKey(r) }))
}

export async function lockKey(tx: Tx, accountId: string, id: string) {
  const [row] = await tx<{ status: KeyStatus; key_hash: string; expired: boolean }[]>`
    select status, key_hash, (status = 'expired' or (status = 'active' and expires_at <= now())) as expired
    from license_keys where id = ${id} and account_id = ${accountId} for update`
  return row ?? null
}

export interface KeyFilter {
  productId?: string
  status?: KeyStatus
  plan?: string
  /** Matches the start of key_prefix; the route lets only [0-9A-Z] through, so LIKE needs no escaping. */
  keyPrefix?: string
  page: number
  pageSize: number
}

export async function listKeys(sql: Sql, accountId: string, f: KeyFilter): Promise<{ keys: Key[]; total: number }> {
  const where = sql`k.account_id = ${accountId}
    ${f.productId !== undefined ? sql`and k.product_id = ${f.productId}` : sql``}
    ${f.plan !== undefined ? sql`and k.plan = ${f.plan}` : sql``}
    ${f.keyPrefix !== undefined ? sql`and k.key_prefix like ${f.keyPrefix + '%'}` : sql``}
    ${
      f.status === 'active'
        ? sql`and k.status = 'active' and (k.expires_at is null or k.expires_at > now())`
        : f.status === 'expired'
          ? sql`and (k.status = 'expired' or (k.status = 'active' and k.expires_at <= now()))`
          : f.status === 'revoked'
            ? sql`and k.status = 'revoked'`
            : sql``
    }`
  const [{ total }] = await sql<{ total: number }[]>`select count(*)::int as total from license_keys k where ${where}`
  const rows = await sql<Row[]>`select ${keyColumns(sql)} from license_keys k where ${where}
    order by k.created_at desc, k.id desc limit ${f.pageSize} offset ${f.page * f.pageSize}`
  return { keys: rows.map(toKey), total }
}

export async function revokeKey(tx: Tx, id: string, reason: string | null): Promise<void> {
  await tx`update license_keys set status = 'revoked', revoked_at = now(), revoke_reason = ${reason}, updated_at = now()
    where id = ${id}`
}

export async function extendKey(tx: Tx, id: string, expiresAt: Date | null): Promise<void> {
  await tx`update license_keys set expires_at = ${expiresAt}, status = 'active', updated_at = now() where id = ${id}`
}

export interface KeySettings {
  plan: string | null
  activationLimit: number
  metadata: Record<string, unknown>
  releaseAfterSeconds: number | null
  deactivationsAllowed: number | null
}

/**
 * PATCH: the new settings of a locked key. Its active activations carry a copy of
 * release_after_seconds (the inactivity job's index needs it on the activation row), kept equal here.
 */
export async function updateSettings(tx: Tx, id: string, s: KeySettings, releaseAfterChanged: boolean): Promise<void> {
  await tx`update license_keys set plan = ${s.plan}, activation_limit = ${s.activationLimit},
      metadata = ${tx.json(s.metadata as JSONValue)}, release_after_seconds = ${s.releaseAfterSeconds},
      deactivations_allowed = ${s.deactivationsAllowed}, updated_at = now()
    where id = ${id}`
  if (releaseAfterChanged) {
    await tx`update activations set release_after_seconds = ${s.releaseAfterSeconds} where key_id = ${id} and status = 'active'`
  }
}

// The SQL of an import: what the account holds (products, policies, external ids, values), and the
// rows written in three statements whatever their number (keys, activations, hash-only values), each
// one JSON parameter unpacked by Postgres (a multi-row VALUES would run out of parameters at 10,000 rows).
import type { JSONValue } from 'postgres'
import type { RefillRule } from '../../core/credits'
import type { Tx } from '../../infra/db'
import type { Catalog, CatalogPolicy } from './import-rows'

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

export interface KeyInsert {
  id: string
  account_id: string
  product_id: string
  key_hash: string
  portable_hash: string | null
  key_prefix: string
  external_id: string | null
  plan: string | null
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
  release_after_seconds: number | null
  deactivations_allowed: number | null
  entitlements: Record<string, unknown>
  grace_seconds: number | null
  after_expiry: 'refuse' | 'keep' | null
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

export async function insertKeys(tx: Tx, keys: KeyInsert[]): Promise<void> {
  if (keys.length === 0) return
  await tx`insert into license_keys (id, account_id, product_id, key_hash, portable_hash, key_prefix, external_id, plan, activation_limit,
      expires_at, status, revoked_at, revoke_reason, suspended_at, suspend_reason, suspended_until, metadata, release_after_seconds,
      deactivations_allowed, entitlements, grace_seconds, after_expiry, policy_id, own_fields, created_at, updated_at, pending_duration,
      credits_remaining, credits_refill, credits_since, customer_email, customer_name, customer_external_id)
    select id, account_id, product_id, key_hash, portable_hash, key_prefix, external_id, plan, activation_limit,
      expires_at, status, revoked_at, revoke_reason, suspended_at, suspend_reason, suspended_until, metadata, release_after_seconds,
      deactivations_allowed, entitlements, grace_seconds, after_expiry, policy_id, own_fields, created_at, now(), pending_duration,
      credits_remaining, credits_refill, credits_since, customer_email, customer_name, customer_external_id
    from jsonb_to_recordset(${tx.json(keys as unknown as JSONValue)}) as r(id text, account_id text, product_id text, key_hash text,
      portable_hash text, key_prefix text, external_id text, plan text, activation_limit integer, expires_at timestamptz, status text,
      revoked_at timestamptz, revoke_reason text, suspended_at timestamptz, suspend_reason text, suspended_until timestamptz,
      metadata jsonb, release_after_seconds integer, deactivations_allowed integer, entitlements jsonb, grace_seconds integer,
      after_expiry text, policy_id text, own_fields text[], created_at timestamptz, pending_duration text, credits_remaining bigint,
      credits_refill jsonb, credits_since timestamptz, customer_email text, customer_name text, customer_external_id text)`
}

export async function insertActivations(tx: Tx, rows: ActivationInsert[]): Promise<void> {
  if (rows.length === 0) return
  await tx`insert into activations (id, account_id, key_id, product_id, device_fingerprint, device_name, app_version, activated_at,
      release_after_seconds)
    select id, account_id, key_id, product_id, device_fingerprint, device_name, app_version, activated_at, release_after_seconds
    from jsonb_to_recordset(${tx.json(rows as unknown as JSONValue)}) as r(id text, account_id text, key_id text, product_id text,
      device_fingerprint text, device_name text, app_version text, activated_at timestamptz, release_after_seconds integer)`
}

export async function insertSha256(tx: Tx, rows: { key_id: string; account_id: string; sha256: string }[]): Promise<void> {
  if (rows.length === 0) return
  await tx`insert into key_sha256_imports (key_id, account_id, sha256)
    select key_id, account_id, sha256 from jsonb_to_recordset(${tx.json(rows as unknown as JSONValue)}) as r(key_id text, account_id text, sha256 text)`
}

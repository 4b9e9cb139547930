import type { JSONValue } from 'postgres'
import type { Sql, Tx } from '../../infra/db'
import { iso } from '../../core/values'
import { KEY_SETTINGS, overridesOf, type OwnSettings, type SettingValues } from '../../core/key-settings'
import { effectivePlan, effectiveSettings, joinPolicy, settingAssignments, settingColumns, settingParams } from '../policies/repo'
import type { RefillRule } from '../../core/credits'
import { creditsView, leasedOf, type CreditsColumns } from '../credits/repo'
import { customerOf, type CustomerColumns } from '../../core/customer'
import type { Key, KeyStatus } from './model'
import { searchCondition } from './search'
import { relaySeatsColumn } from '../activations/relay-count'

/** The key's own columns as selected: `own_fields` and `own_<setting>` for each of OwnSettings. */
type OwnColumns = { own_fields: string[] } & { [F in Exclude<keyof OwnSettings, 'own_fields'> as `own_${F}`]: OwnSettings[F] }

type Row = CreditsColumns &
  CustomerColumns &
  Omit<SettingValues, 'one_key_per_device'> &
  OwnColumns & {
    id: string
    product_id: string
    status: KeyStatus
    activations_used: number
    expires_at: Date | null
    created_at: Date
    revoked_at: Date | null
    revoke_reason: string | null
    suspended_at: Date | null
    suspend_reason: string | null
    suspended_until: Date | null
    metadata: Record<string, unknown>
    key_prefix: string
    deactivations_used: number
    policy_id: string | null
    expiry_pending: boolean
    external_id: string | null
  }

/** The settings a key may set itself (core/key-settings.ts): its own values are read as own_<field>. */
export const OWN = KEY_SETTINGS.filter((s) => s.inherit !== 'policy')

/** The key's own columns, in the shape core/key-settings.ts reads. */
const ownOf = (r: Row): OwnSettings => {
  const own: Record<string, unknown> = { own_fields: r.own_fields }
  for (const s of OWN) own[s.field] = r[`own_${s.field}` as keyof OwnColumns]
  return own as unknown as OwnSettings
}

/** `k.<column> as own_<field>` for each of OWN. */
const ownColumns = (sql: Sql | Tx) => {
  const parts = OWN.map((s) => sql`k.${sql(s.column)} as ${sql(`own_${s.field}`)}`)
  return parts.slice(1).reduce((all, part) => sql`${all}, ${part}`, parts[0]!)
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
  suspended_at: iso(r.suspended_at),
  suspend_reason: r.suspend_reason,
  suspended_until: iso(r.suspended_until),
  metadata: r.metadata,
  key_prefix: r.key_prefix,
  release_after_seconds: r.release_after_seconds,
  deactivations_allowed: r.deactivations_allowed,
  deactivations_used: r.deactivations_used,
  entitlements: r.entitlements,
  grace_seconds: r.grace_seconds,
  after_expiry: r.after_expiry,
  component_match: r.component_match,
  policy_id: r.policy_id,
  external_id: r.external_id,
  overrides: overridesOf(ownOf(r), r.policy_id !== null),
  expiry_pending: r.expiry_pending,
  credits: creditsView(r),
  customer: customerOf(r),
})

/**
 * The key columns with the effective status, settings (its own, else its policy's) and the live
 * activation count, plus its own values (for `overrides`). Read from `keyFrom`.
 */
export const keyColumns = (sql: Sql | Tx) => sql`
  k.id, k.product_id,
  key_effective_status(k.status, k.expires_at, k.suspended_at) as status,
  (select count(*)::int from activations a where a.key_id = k.id and a.status = 'active') + ${relaySeatsColumn(sql)} as activations_used,
  k.expires_at, k.created_at, k.revoked_at, k.revoke_reason, k.suspended_at, k.suspend_reason, k.suspended_until, k.metadata, k.key_prefix,
  k.deactivations_used, ${effectiveSettings(sql)},
  k.policy_id, k.pending_duration is not null as expiry_pending, k.external_id, k.own_fields, ${ownColumns(sql)},
  k.credits_remaining, k.credits_refill, k.credits_since, k.credits_debt, ${leasedOf(sql)} as credits_leased,
  k.customer_email, k.customer_name, k.customer_external_id`

/** A key `k` with its policy `p`. */
export const keyFrom = (sql: Sql | Tx) => sql`license_keys k ${joinPolicy(sql)}`

export async function insertKey(
  tx: Tx,
  k: {
    id: string
    accountId: string
    productId: string
    keyHash: string
    keyPrefix: string
    /** its own value of each setting it may set (core/key-settings.ts); entitlements checked by checkEntitlements */
    own: Omit<OwnSettings, 'own_fields'>
    expiresAt: Date | null
    /** a JSON object (checked by checkMetadata) */
    metadata: Record<string, unknown>
    policyId: string | null
    /** with a policy: which of plan, activation_limit, release_after_seconds, deactivations_allowed the key sets */
    ownFields: string[]
    createdAt: Date
    /** expiry_basis first_activation: the duration its first activation adds (expiresAt is then null) */
    pendingDuration: string | null
    /** null = unmetered; the refill period counts from createdAt */
    credits: { remaining: number; refill: RefillRule | null } | null
    /** its id in another system (a payment connector's provider ids); unique in the account */
    externalId?: string | null
    /** who holds it (checked by checkCustomer) */
    customer?: CustomerColumns
  },
): Promise<Key> {
  await tx`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, ${settingColumns(tx, OWN)}, expires_at, metadata,
      policy_id, own_fields, created_at, pending_duration, credits_remaining, credits_refill, credits_since, external_id,
      customer_email, customer_name, customer_external_id)
    values (${k.id}, ${k.accountId}, ${k.productId}, ${k.keyHash}, ${k.keyPrefix}, ${settingParams(tx, k.own, OWN)},
            ${k.expiresAt}, ${tx.json(k.metadata as JSONValue)}, ${k.policyId}, ${k.ownFields}, ${k.createdAt},
            ${k.pendingDuration}, ${k.credits?.remaining ?? null},
            ${k.credits?.refill ? tx.json(k.credits.refill as unknown as JSONValue) : null}, ${k.credits ? k.createdAt : null},
            ${k.externalId ?? null}, ${k.customer?.customer_email ?? null}, ${k.customer?.customer_name ?? null},
            ${k.customer?.customer_external_id ?? null})`
  return (await findKey(tx, k.accountId, k.id))!
}

export async function findKey(sql: Sql | Tx, accountId: string, id: string): Promise<Key | null> {
  const [row] = await sql<Row[]>`select ${keyColumns(sql)} from ${keyFrom(sql)} where k.id = ${id} and k.account_id = ${accountId}`
  return row ? toKey(row) : null
}

/** Keys by id with their account (any account: for background jobs), in expiry order. */
export async function findKeysByIds(sql: Sql | Tx, ids: string[]): Promise<{ accountId: string; key: Key }[]> {
  const rows = await sql<(Row & { account_id: string })[]>`select ${keyColumns(sql)}, k.account_id from ${keyFrom(sql)}
    where k.id in ${sql(ids)} order by k.expires_at, k.id`
  return rows.map((r) => ({ accountId: r.account_id, key: toKey(r) }))
}

/** What a key stores of its settings: its own values (see KeySettings), and its policy. */
export async function ownSettings(tx: Tx, id: string): Promise<KeySettings & { policy_id: string | null }> {
  const [r] = await tx<(KeySettings & { policy_id: string | null })[]>`select own_fields, ${settingColumns(tx, OWN)}, metadata, policy_id,
      customer_email, customer_name, customer_external_id
    from license_keys where id = ${id}`
  return r!
}

export async function lockKey(tx: Tx, accountId: string, id: string) {
  const [row] = await tx<{ status: 'active' | 'revoked' | 'expired'; key_hash: string; expired: boolean; suspended: boolean }[]>`
    select status, key_hash, (status = 'expired' or (status = 'active' and expires_at <= now())) as expired,
      suspended_at is not null as suspended
    from license_keys where id = ${id} and account_id = ${accountId} for update`
  return row ?? null
}

export interface KeyFilter {
  productId?: string
  status?: KeyStatus
  plan?: string
  policyId?: string
  /** Matches the start of key_prefix; the route lets only [0-9A-Z] through, so LIKE needs no escaping. */
  keyPrefix?: string
  /** the search (search.ts): ids, customer id, key prefix, customer e-mail or name */
  q?: string
  page: number
  pageSize: number
}

export async function listKeys(sql: Sql, accountId: string, f: KeyFilter): Promise<{ keys: Key[]; total: number }> {
  const where = sql`k.account_id = ${accountId}
    ${f.productId !== undefined ? sql`and k.product_id = ${f.productId}` : sql``}
    ${f.plan !== undefined ? sql`and ${effectivePlan(sql)} = ${f.plan}` : sql``}
    ${f.policyId !== undefined ? sql`and k.policy_id = ${f.policyId}` : sql``}
    ${f.keyPrefix !== undefined ? sql`and k.key_prefix like ${f.keyPrefix + '%'}` : sql``}
    ${f.status !== undefined ? sql`and key_effective_status(k.status, k.expires_at, k.suspended_at) = ${f.status}` : sql``}
    ${f.q !== undefined ? sql`and ${searchCondition(sql, f.q)}` : sql``}`
  const [{ total }] = await sql<{ total: number }[]>`select count(*)::int as total from ${keyFrom(sql)} where ${where}`
  const rows = await sql<Row[]>`select ${keyColumns(sql)} from ${keyFrom(sql)} where ${where}
    order by k.created_at desc, k.id desc limit ${f.pageSize} offset ${f.page * f.pageSize}`
  return { keys: rows.map(toKey), total }
}

/** Revoking ends a suspension: the key is revoked, for good, and nothing else. */
export async function revokeKey(tx: Tx, id: string, reason: string | null): Promise<void> {
  await tx`update license_keys set status = 'revoked', revoked_at = now(), revoke_reason = ${reason},
      suspended_at = null, suspend_reason = null, suspended_until = null, updated_at = now()
    where id = ${id}`
}

/** Suspends a locked key, or replaces the reason and end of its suspension (suspended_at stays). */
export async function suspendKey(tx: Tx, id: string, reason: string | null, until: Date | null): Promise<void> {
  await tx`update license_keys set suspended_at = coalesce(suspended_at, now()), suspend_reason = ${reason},
      suspended_until = ${until}, updated_at = now()
    where id = ${id}`
}

export async function reinstateKey(tx: Tx, id: string): Promise<void> {
  await tx`update license_keys set suspended_at = null, suspend_reason = null, suspended_until = null, updated_at = now()
    where id = ${id}`
}

/**
 * A new key value for a locked key: only its hash and prefix change; devices and history stay. What an
 * import kept of the old value (its portable hash, a SHA-256 awaiting its first validate) goes with it.
 */
export async function reissueKey(tx: Tx, id: string, keyHash: string, keyPrefix: string): Promise<void> {
  await tx`update license_keys set key_hash = ${keyHash}, portable_hash = null, key_prefix = ${keyPrefix}, updated_at = now() where id = ${id}`
  await tx`delete from key_sha256_imports where key_id = ${id}`
}

export async function extendKey(tx: Tx, id: string, expiresAt: Date | null): Promise<void> {
  // an explicit expiry ends a pending one (expiry_basis first_activation)
  await tx`update license_keys set expires_at = ${expiresAt}, pending_duration = null, status = 'active', updated_at = now() where id = ${id}`
}

/**
 * A key's own settings as stored (core/key-settings.ts OwnSettings: without a policy, the flagged
 * columns are its values; with one, a flagged column counts only when `own_fields` names it, and grace,
 * after_expiry (null = inherited or default) and entitlements (merged over the policy's) are the
 * key's own either way), with its metadata and customer.
 */
export interface KeySettings extends OwnSettings, CustomerColumns {
  own_fields: string[]
  metadata: Record<string, unknown>
}

/**
 * PATCH: the new settings of a locked key. Its active activations carry a copy of the effective
 * release_after_seconds (the inactivity job's index needs it on the activation row): see copyReleaseAfter.
 */
export async function updateSettings(tx: Tx, id: string, s: KeySettings): Promise<void> {
  await tx`update license_keys set ${settingAssignments(tx, s, OWN)},
      metadata = ${tx.json(s.metadata as JSONValue)}, own_fields = ${s.own_fields}, customer_email = ${s.customer_email},
      customer_name = ${s.customer_name}, customer_external_id = ${s.customer_external_id}, updated_at = now()
    where id = ${id}`
}

/** The key's active activations take its new effective release_after_seconds. */
export async function copyReleaseAfter(tx: Tx, id: string, releaseAfterSeconds: number | null): Promise<void> {
  await tx`update activations set release_after_seconds = ${releaseAfterSeconds} where key_id = ${id} and status = 'active'`
}

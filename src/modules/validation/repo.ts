import { mergeEntitlements, type Entitlements } from '../../core/entitlements'
import type { Sql } from '../../infra/db'
import { effectiveSettings, joinPolicy } from '../policies/repo'
import { relaySeatsColumn } from '../activations/relay-count'
import { keyHashOf, type KeyRow, type KeyStatus, type OwnTerms } from './hot/hot-state'
import { NO_ENTITLEMENTS } from './hot/key-row'

type StateRow = {
  account_id: string
  product_id: string
  status: KeyStatus
  plan: string | null
  expires_at: Date | null
  activation_limit: number
  devices: string[]
  entitlements: Record<string, true | number | string | null>
  grace_seconds: number | null
  after_expiry: 'refuse' | 'keep' | null
  policy_id: string | null
  own_fields: string[]
  metered: boolean
  relay_seats: number
}

/** Everything validate needs about one key, in one query; null when no key has this hash. */
export async function loadKeyState(sql: Sql, keyHash: string): Promise<KeyRow | null> {
  // The status without expiry: validate judges expiry itself from expires_at, grace and keep.
  const [row] = await sql<StateRow[]>`select k.account_id, k.product_id,
      case when k.status = 'revoked' then 'revoked' when k.suspended_at is not null then 'suspended' else 'active' end as status,
      k.plan, k.expires_at, k.activation_limit, k.entitlements, k.grace_seconds, k.after_expiry, k.policy_id, k.own_fields,
      k.credits_remaining is not null as metered, ${relaySeatsColumn(sql)} as relay_seats,
      coalesce((select array_agg(a.device_fingerprint) from activations a
                where a.key_id = k.id and a.status = 'active'), '{}') as devices
    from license_keys k where k.key_hash = ${keyHash}`
  if (!row) return null
  // With a policy: only what the key sets itself; the policy's terms are merged in on use (applyPolicy).
  if (row.policy_id !== null) {
    const own: OwnTerms = { entitlements: Object.freeze(row.entitlements) }
    if (row.own_fields.includes('plan')) own.plan = row.plan
    if (row.own_fields.includes('activation_limit')) own.limit = row.activation_limit
    if (row.grace_seconds !== null) own.graceMs = row.grace_seconds * 1000
    if (row.after_expiry !== null) own.keep = row.after_expiry === 'keep'
    return {
      accountId: row.account_id,
      productId: row.product_id,
      status: row.status,
      plan: null,
      expiresAt: row.expires_at ? row.expires_at.getTime() : null,
      limit: 0,
      devices: row.devices,
      entitlements: NO_ENTITLEMENTS,
      graceMs: 0,
      keep: false,
      policyId: row.policy_id,
      own,
      oneKeyPerDevice: false, // the policy's, merged in on use
      metered: row.metered,
      relaySeats: row.relay_seats,
    }
  }
  const entitlements = mergeEntitlements(null, row.entitlements)
  return {
    accountId: row.account_id,
    productId: row.product_id,
    status: row.status,
    plan: row.plan,
    expiresAt: row.expires_at ? row.expires_at.getTime() : null,
    limit: row.activation_limit,
    devices: row.devices,
    entitlements: Object.keys(entitlements).length === 0 ? NO_ENTITLEMENTS : Object.freeze(entitlements),
    graceMs: (row.grace_seconds ?? 0) * 1000,
    keep: row.after_expiry === 'keep',
    policyId: null,
    own: null,
    oneKeyPerDevice: false,
    metered: row.metered,
    relaySeats: row.relay_seats,
  }
}

export interface HolderKey {
  id: string
  product_id: string
  /** effective: a key past expires_at is expired even before the sweeper ran */
  status: KeyStatus
  activation_limit: number
  deactivations_allowed: number | null
  deactivations_used: number
}

/** The key a holder asks about (POST /v1/devices); null when this account has no key with this hash. */
export async function findHolderKey(sql: Sql, accountId: string, keyHash: string): Promise<HolderKey | null> {
  const [row] = await sql<HolderKey[]>`select k.id, k.product_id, ${effectiveSettings(sql)}, k.deactivations_used,
      key_effective_status(k.status, k.expires_at, k.suspended_at) as status
    from license_keys k ${joinPolicy(sql)} where k.key_hash = ${keyHash} and k.account_id = ${accountId}`
  return row ?? null
}

export interface Seen {
  /** the key's hot-state key: its key_hash digest in base64 */
  hotKey: string
  fingerprint: string
  at: number
  appVersion: string | null
  /** the newest name sent, null when no call of the batch sent one */
  deviceName: string | null
}

/**
 * Applies a batch of repeat validations: last_validated_at moves forward only, app_version and
 * device_name change only when a call sent one. A device deactivated meanwhile is skipped (status = 'active').
 */
export async function touchActivations(sql: Sql, batch: Seen[]): Promise<void> {
  if (batch.length === 0) return
  const hashes = batch.map((s) => keyHashOf(s.hotKey))
  const fps = batch.map((s) => s.fingerprint)
  const ats = batch.map((s) => new Date(s.at).toISOString())
  const versions = batch.map((s) => s.appVersion)
  const names = batch.map((s) => s.deviceName)
  await sql`update activations a
    set last_validated_at = greatest(a.last_validated_at, v.at), app_version = coalesce(v.app_version, a.app_version),
        device_name = coalesce(v.device_name, a.device_name)
    from (select unnest(${hashes}::text[]) as h, unnest(${fps}::text[]) as fp,
                 unnest(${ats}::timestamptz[]) as at, unnest(${versions}::text[]) as app_version,
                 unnest(${names}::text[]) as device_name) v
      join license_keys k on k.key_hash = v.h
    where a.key_id = k.id and a.device_fingerprint = v.fp and a.status = 'active'`
}

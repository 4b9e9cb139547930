import { mergeEntitlements, type Entitlements } from '../../core/entitlements'
import type { Sql } from '../../infra/db'
import { effectiveSettings, joinPolicy } from '../policies/repo'
import { relaySeatsColumn } from '../activations/relay-count'
import { keyHashOf, type KeyRow, type KeyStatus, type OwnTerms } from './hot/hot-state'
import { NO_ENTITLEMENTS, type KeyIdentity } from './hot/key-row'
import type { ComponentMatch, Components } from '../../core/component-match'

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
  /** the key's own component_match (null: inherited) and the effective one */
  own_component_match: ComponentMatch | null
  component_match: ComponentMatch
  /** with the rule on: the active fingerprints' stored components, and the fingerprints they replaced */
  components: Record<string, Components> | null
  replaced: string[] | null
}

/** Machine identity in memory (hot/key-row.ts KeyIdentity), for a key whose rule is on at load. */
function identityOf(row: StateRow): KeyIdentity | null {
  if (row.component_match === 'off') return null
  return { components: new Map(Object.entries(row.components ?? {})), replaced: new Set(row.replaced ?? []) }
}

/** Everything validate needs about one key, in one query; null when no key has this hash. */
export async function loadKeyState(sql: Sql, keyHash: string): Promise<KeyRow | null> {
  // The status without expiry: validate judges expiry itself from expires_at, grace and keep.
  const [row] = await sql<StateRow[]>`select k.account_id, k.product_id,
      case when k.status = 'revoked' then 'revoked' when k.suspended_at is not null then 'suspended' else 'active' end as status,
      k.plan, k.expires_at, k.activation_limit, k.entitlements, k.grace_seconds, k.after_expiry, k.policy_id, k.own_fields,
      k.credits_remaining is not null as metered, ${relaySeatsColumn(sql)} as relay_seats,
      coalesce((select array_agg(a.device_fingerprint) from activations a
                where a.key_id = k.id and a.status = 'active'), '{}') as devices,
      k.component_match as own_component_match, r.rule as component_match,
      case when r.rule <> 'off' then
        (select jsonb_object_agg(a.device_fingerprint, a.components) from activations a
          where a.key_id = k.id and a.status = 'active' and a.components is not null) end as components,
      case when r.rule <> 'off' then
        (select array_agg(f) from activations a, unnest(a.replaced_fingerprints) f
          where a.key_id = k.id and a.status = 'active') end as replaced
    from license_keys k ${joinPolicy(sql)}
      -- the effective rule, once: the key's own, else its policy's, else off
      cross join lateral (select coalesce(k.component_match, p.component_match, 'off') as rule) r
    where k.key_hash = ${keyHash}`
  if (!row) return null
  // With a policy: only what the key sets itself; the policy's terms are merged in on use (applyPolicy).
  if (row.policy_id !== null) {
    const own: OwnTerms = { entitlements: Object.freeze(row.entitlements) }
    if (row.own_fields.includes('plan')) own.plan = row.plan
    if (row.own_fields.includes('activation_limit')) own.limit = row.activation_limit
    if (row.grace_seconds !== null) own.graceMs = row.grace_seconds * 1000
    if (row.after_expiry !== null) own.keep = row.after_expiry === 'keep'
    if (row.own_component_match !== null) own.componentMatch = row.own_component_match
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
      identity: identityOf(row),
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
    componentMatch: row.component_match,
    identity: identityOf(row),
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
  /** the newest components sent, null when no call of the batch sent any (the stored set is kept) */
  components: Components | null
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
  // jsonb travels as text (one array parameter); equal sets compare equal whatever their order
  const components = batch.map((s) => (s.components === null ? null : JSON.stringify(s.components)))
  await sql`update activations a
    set last_validated_at = greatest(a.last_validated_at, v.at), app_version = coalesce(v.app_version, a.app_version),
        device_name = coalesce(v.device_name, a.device_name),
        components = coalesce(v.components, a.components),
        components_changed_at = case when v.components is not null and v.components is distinct from a.components
                                     then v.at else a.components_changed_at end
    from (select unnest(${hashes}::text[]) as h, unnest(${fps}::text[]) as fp,
                 unnest(${ats}::timestamptz[]) as at, unnest(${versions}::text[]) as app_version,
                 unnest(${names}::text[]) as device_name, unnest(${components}::text[])::jsonb as components) v
      join license_keys k on k.key_hash = v.h
    where a.key_id = k.id and a.device_fingerprint = v.fp and a.status = 'active'`
}

import type { Sql, Tx } from '../../infra/db'
import type { ComponentMatch } from '../../core/component-match'
import { effectiveSettings, expiryRefused, joinPolicy } from '../policies/repo'

export async function insertLicense(
  tx: Tx,
  l: {
    id: string
    accountId: string
    keyId: string
    activationId: string
    fingerprint: string
    ttlSeconds: number
    issuedAt: Date
    expiresAt: Date
  },
): Promise<void> {
  await tx`insert into offline_licenses (id, account_id, key_id, activation_id, device_fingerprint, ttl_seconds, issued_at, expires_at)
    values (${l.id}, ${l.accountId}, ${l.keyId}, ${l.activationId}, ${l.fingerprint}, ${l.ttlSeconds}, ${l.issuedAt}, ${l.expiresAt})`
}

/** What sync needs to judge a license now: the key's effective status and the device's live seat. */
export interface LicenseState {
  id: string
  key_id: string
  product_id: string
  plan: string | null
  device_fingerprint: string
  ttl_seconds: number
  key_status: 'active' | 'revoked' | 'suspended' | 'expired'
  key_expires_at: Date | null
  /** validate would refuse the key for its expiry (past expires_at + grace, not kept) */
  expiry_refused: boolean
  grace_seconds: number
  after_expiry: 'refuse' | 'keep'
  entitlements: Record<string, true | number | string>
  /** The device's active activation of the key, if it still holds one (possibly a newer one). */
  active_activation_id: string | null
  /** that activation's stored components */
  active_components: Record<string, string> | null
  component_match: ComponentMatch
}

export async function licenseStates(sql: Sql, accountId: string, ids: string[]): Promise<LicenseState[]> {
  if (ids.length === 0) return []
  return sql<LicenseState[]>`select l.id, l.key_id, k.product_id, l.device_fingerprint, l.ttl_seconds, ${effectiveSettings(sql)},
      key_effective_status(k.status, k.expires_at, k.suspended_at) as key_status,
      k.expires_at as key_expires_at,
      ${expiryRefused(sql)} as expiry_refused,
      (select a.id from activations a
        where a.key_id = l.key_id and a.device_fingerprint = l.device_fingerprint and a.status = 'active'
        limit 1) as active_activation_id,
      (select a.components from activations a
        where a.key_id = l.key_id and a.device_fingerprint = l.device_fingerprint and a.status = 'active'
        limit 1) as active_components
    from offline_licenses l join license_keys k on k.id = l.key_id ${joinPolicy(sql)}
    where l.account_id = ${accountId} and l.id in ${sql(ids)}`
}

/** Records a renewal: the latest issue and expiry, and the activation the device now holds. */
export async function renewLicense(
  tx: Tx,
  r: { id: string; activationId: string; issuedAt: Date; expiresAt: Date },
): Promise<void> {
  await tx`update offline_licenses set issued_at = ${r.issuedAt}, expires_at = ${r.expiresAt}, activation_id = ${r.activationId}
    where id = ${r.id}`
}

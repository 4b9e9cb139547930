import type { Sql } from '../../infra/db'
import { keyHashOf, type KeyRow, type KeyStatus } from './hot-state'

type StateRow = {
  account_id: string
  product_id: string
  status: KeyStatus
  plan: string | null
  expires_at: Date | null
  activation_limit: number
  devices: string[]
}

/** Everything validate needs about one key, in one query; null when no key has this hash. */
export async function loadKeyState(sql: Sql, keyHash: string): Promise<KeyRow | null> {
  const [row] = await sql<StateRow[]>`select k.account_id, k.product_id, k.status, k.plan, k.expires_at, k.activation_limit,
      coalesce((select array_agg(a.device_fingerprint) from activations a
                where a.key_id = k.id and a.status = 'active'), '{}') as devices
    from license_keys k where k.key_hash = ${keyHash}`
  if (!row) return null
  return {
    accountId: row.account_id,
    productId: row.product_id,
    status: row.status,
    plan: row.plan,
    expiresAt: row.expires_at ? row.expires_at.getTime() : null,
    limit: row.activation_limit,
    devices: row.devices,
  }
}

export interface Seen {
  /** the key's hot-state key: its key_hash digest in base64 */
  hotKey: string
  fingerprint: string
  at: number
  appVersion: string | null
}

/**
 * Applies a batch of repeat validations: last_validated_at moves forward only, app_version changes
 * only when the call sent one. A device deactivated meanwhile is skipped (status = 'active').
 */
export async function touchActivations(sql: Sql, batch: Seen[]): Promise<void> {
  if (batch.length === 0) return
  const hashes = batch.map((s) => keyHashOf(s.hotKey))
  const fps = batch.map((s) => s.fingerprint)
  const ats = batch.map((s) => new Date(s.at).toISOString())
  const versions = batch.map((s) => s.appVersion)
  await sql`update activations a
    set last_validated_at = greatest(a.last_validated_at, v.at), app_version = coalesce(v.app_version, a.app_version)
    from (select unnest(${hashes}::text[]) as h, unnest(${fps}::text[]) as fp,
                 unnest(${ats}::timestamptz[]) as at, unnest(${versions}::text[]) as app_version) v
      join license_keys k on k.key_hash = v.h
    where a.key_id = k.id and a.device_fingerprint = v.fp and a.status = 'active'`
}

// POST /v1/devices: the key's holder sees the devices holding its slots, so an app can offer a
// "manage devices" screen (list, then release the lost laptop with POST /v1/deactivate). Read from
// Postgres, not from the hot state (which holds fingerprints only); not counted toward the daily quota.
// The engine (service.ts) has already rate-limited the call and answered unknown keys from memory.
import { AppError } from '../../core/errors'
import type { Principal } from '../../core/principal'
import type { Deps } from '../../deps'
import { listActive } from '../activations/repo'
import { hotKeyOf } from './hot/hot-state'
import type { LastSeenWriter } from './last-seen'
import type { DevicesAnswer } from './model'
import { findHolderKey } from './repo'

const noSuchKey = () => new AppError('not_found', 'No key with this value')

/** `keyHash`: the key asked about, null when the engine already knows it is unknown here. */
export async function listDevices(
  deps: Deps,
  lastSeen: LastSeenWriter,
  who: Principal,
  keyHash: string | null,
  productId: string | null | undefined,
): Promise<DevicesAnswer> {
  if (keyHash === null) throw noSuchKey()
  const key = await findHolderKey(deps.sql, who.accountId, keyHash)
  // A product_id that is not the key's is answered like an unknown key, as on validate.
  if (key === null || (productId != null && productId !== key.product_id)) throw noSuchKey()
  // This node's validations not yet written (batched every FLUSH_INTERVAL_MS) show at once here;
  // another node's reach Postgres with its next batch.
  const pendingFor = lastSeen.pendingOf(hotKeyOf(keyHash))
  const active = await listActive(deps.sql, key.id)
  return {
    status: key.status,
    activation_limit: key.activation_limit,
    activations_used: active.length,
    deactivations_allowed: key.deactivations_allowed,
    deactivations_used: key.deactivations_used,
    devices: active.map((a) => {
      const seen = pendingFor(a.device_fingerprint)
      const at = seen ? new Date(seen.at).toISOString() : null
      return {
        device_fingerprint: a.device_fingerprint,
        device_name: seen?.deviceName ?? a.device_name,
        app_version: seen?.appVersion ?? a.app_version,
        country: a.country,
        activated_at: a.activated_at,
        last_validated_at: at !== null && (a.last_validated_at === null || at > a.last_validated_at) ? at : a.last_validated_at,
      }
    }),
  }
}

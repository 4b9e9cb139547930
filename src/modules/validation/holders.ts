// The license holder's routes: POST /v1/devices (the key's active devices, so an app can offer a
// "manage devices" screen) and POST /v1/deactivate (release the lost laptop). Both take the key as
// credential and cost Postgres work, so both pass the same gate first: a per-account rate and
// concurrency cap on this node (holder-gate.ts), and a key this node knows not to exist in the account (the hot state, its negative entries
// included) is answered without Postgres. The list is read from Postgres, not from the hot state
// (which holds fingerprints only), and neither route counts toward the daily validate quota. The
// release itself is the activations module's (modules/activations/service.ts, releaseByHolder).
import { AppError } from '../../core/errors'
import type { Principal } from '../../core/principal'
import type { Deps } from '../../deps'
import { portableKeyHash } from '../../infra/crypto'
import { listActive } from '../activations/repo'
import { releaseByHolder } from '../activations/service'
import { hotKeyOf, keyHashOf, type HotState } from './hot/hot-state'
import type { ImportedLookup } from './imported'
import type { LastSeenWriter } from './last-seen'
import type { DeactivateAnswer, DeactivateBody, DevicesAnswer, DevicesBody } from './model'
import { findHolderKey } from './repo'
import { HolderGate } from './holder-gate'
import { relaySeatsOf } from '../activations/relay-count'

const noSuchKey = () => new AppError('not_found', 'No key with this value')

export class Holders {
  /** POST /v1/devices and /v1/deactivate per account, on this node: rate and concurrency (holder-gate.ts). */
  private gate: HolderGate

  constructor(
    private deps: Deps,
    private hot: HotState,
    private imported: ImportedLookup,
    private lastSeen: LastSeenWriter,
  ) {
    this.gate = new HolderGate(deps.config.holderRatePerSecond, deps.config.holderRateBurst)
  }

  /**
   * A key this node knows not to exist in the account (the hot state, its negative entries included)
   * is answered without Postgres. Returns the key's hash, or null for an unknown key (or another
   * product's). Called once the call is admitted by the gate (`admitted`); the air-gapped routes
   * (modules/air-gapped) find their key the same way, behind their own limits.
   */
  async holderKey(who: Pick<Principal, 'accountId'>, key: string, productId: string | null | undefined): Promise<string | null> {
    const now = Date.now()
    let hotKey = portableKeyHash(key, 'base64')
    if (hotKey === null) return null
    let state = this.hot.get(hotKey, now)
    if (state instanceof Promise) state = await state
    if (state === null || state.accountId !== who.accountId) {
      const found = await this.imported.find(who.accountId, key, hotKey, Date.now())
      if (found === null) return null
      ;({ hotKey, state } = found)
    }
    if (productId != null && productId !== state.productId) return null
    return keyHashOf(hotKey)
  }

  /**
   * POST /v1/deactivate: the key's holder releases one of its devices (activations/service.ts,
   * releaseByHolder); a device holding no seat, or an unknown key, is `deactivated: false`.
   */
  deactivate(who: Principal, body: DeactivateBody): Promise<DeactivateAnswer> {
    return this.admitted(who, () => this.release(who, body))
  }

  /** POST /v1/devices: the key's active devices; an unknown key (or another product's) is 404. */
  devices(who: Principal, body: DevicesBody): Promise<DevicesAnswer> {
    return this.admitted(who, () => this.list(who, body))
  }

  /** Runs `call` once the account's gate admits it (429 `rate_limited` past its rate or its queue). */
  private async admitted<T>(who: Principal, call: () => Promise<T>): Promise<T> {
    const done = await this.gate.admit(who.accountId, Date.now())
    try {
      return await call()
    } finally {
      done()
    }
  }

  private async release(who: Principal, body: DeactivateBody): Promise<DeactivateAnswer> {
    const keyHash = await this.holderKey(who, body.key, null)
    const result = keyHash === null ? null : await releaseByHolder(this.deps, who.accountId, keyHash, body.device_fingerprint.toLowerCase())
    if (!result) return { deactivated: false, activations_used: 0, activation_limit: 0 }
    return { deactivated: result.deactivated, activations_used: result.used, activation_limit: result.limit }
  }

  private async list(who: Principal, body: DevicesBody): Promise<DevicesAnswer> {
    const keyHash = await this.holderKey(who, body.key, body.product_id)
    if (keyHash === null) throw noSuchKey()
    const key = await findHolderKey(this.deps.sql, who.accountId, keyHash)
    // A product_id that is not the key's is answered like an unknown key, as on validate.
    if (key === null || (body.product_id != null && body.product_id !== key.product_id)) throw noSuchKey()
    // This node's validations not yet written (batched every FLUSH_INTERVAL_MS) show at once here;
    // another node's reach Postgres with its next batch.
    const pendingFor = this.lastSeen.pendingOf(hotKeyOf(keyHash))
    const active = await listActive(this.deps.sql, key.id)
    return {
      status: key.status,
      activation_limit: key.activation_limit,
      activations_used: active.length + (await relaySeatsOf(this.deps.sql, key.id)),
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
}

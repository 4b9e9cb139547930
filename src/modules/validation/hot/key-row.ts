// What the hot state holds about one key, as read from Postgres (repo.ts loadKeyState): the row type
// shared by the hot state (hot-state.ts) and its packed storage (key-table.ts).
import type { Entitlements, OwnEntitlements } from '../../../core/entitlements'

export type KeyStatus = 'active' | 'revoked' | 'suspended' | 'expired'

/** Most keys unlock nothing: one shared frozen object rather than one per key in memory. */
export const NO_ENTITLEMENTS = Object.freeze({}) as Entitlements

/** What Postgres says about one key (see repo.loadKeyState). */
export interface KeyRow {
  accountId: string
  productId: string
  status: KeyStatus
  plan: string | null
  /** epoch ms, null = perpetual */
  expiresAt: number | null
  limit: number
  /** fingerprints (lower-case hex) of the active activations */
  devices: string[]
  /** the effective entitlements (one shared frozen object when none) */
  entitlements: Entitlements
  /** after expiresAt, valid (marked expired) this long */
  graceMs: number
  /** after_expiry keep: valid forever after expiry, marked expired */
  keep: boolean
  /**
   * The key's policy, or null. With one, plan, limit, entitlements, graceMs and keep above are merged
   * from `own` and the policy's terms on use (applyPolicy), so a policy edit needs no key reload.
   */
  policyId: string | null
  own: OwnTerms | null
  /** the policy's one_key_per_device: a new device is decided in Postgres even when the key looks full */
  oneKeyPerDevice: boolean
  /** a metered key (credits not null): a valid answer spends its cost from this node's lease (credits/leases.ts) */
  metered: boolean
  /** the seats its live relays hold (docs/api.md, "Relays"): taken like devices' (0 for most keys) */
  relaySeats: number
}

/** What a key with a policy sets itself: an absent field is inherited. */
export interface OwnTerms {
  plan?: string | null
  limit?: number
  graceMs?: number
  keep?: boolean
  /** the key's own map: a null removes a code the policy gives */
  entitlements: OwnEntitlements
}

// Machine identity on validate's hot path (docs/integrating.md, "Identifying machines"): with the key's
// component_match on, what memory alone decides about the components sent. A known fingerprint is
// decided here with no I/O (match → valid, following drift; mismatch → device_mismatch), and so are
// the refusals that need no seat decision (no components, a replaced fingerprint, a full key whose
// devices none match). Anything that would take or move a seat (a new device, a rebind) is decided in
// Postgres under the key row lock (activations/identity.ts identityStep), exactly.
import { componentsMatch, sameComponents, type Components } from '../../core/component-match'
import { deviceCount, hasDevice, type KeyIdentity, type KeyState } from './hot/hot-state'

/** The fingerprint holds a seat and its components match (the stored ones are the same). */
export const KNOWN = 0
/** The fingerprint holds a seat and its components match, but differ: the stored set follows them. */
export const DRIFT = 1
/** device_mismatch: no components, a mismatch, or a fingerprint an activation replaced. */
export const MISMATCH = 2
/** activation_limit: a new device that matches no activation, every seat taken. */
export const LIMIT = 3
/** Postgres decides: a new device (a seat or a rebind). */
export const CLAIM = 4
export type Verdict = typeof KNOWN | typeof DRIFT | typeof MISMATCH | typeof LIMIT | typeof CLAIM

/**
 * What memory decides for `fingerprint` sending `sent` to a key whose rule is on and whose identity is
 * in memory (validate's step 6 with machine identity: 6a, 6b, then 6c or the seat steps).
 */
export function identityVerdict(state: KeyState, identity: KeyIdentity, fingerprint: string, sent: Components | null): Verdict {
  if (sent === null) return MISMATCH
  const rule = state.componentMatch
  if (hasDevice(state, fingerprint)) {
    const stored = identity.components.get(fingerprint)
    // an activation with no stored components adopts the first ones sent for its fingerprint
    if (stored === undefined) return DRIFT
    if (!componentsMatch(rule, stored, sent)) return MISMATCH
    return sameComponents(stored, sent) ? KNOWN : DRIFT
  }
  if (identity.replaced.has(fingerprint)) return MISMATCH
  if (contested(state, identity, sent)) return CLAIM
  return deviceCount(state) >= state.limit && !state.oneKeyPerDevice ? LIMIT : CLAIM
}

/** Whether `sent` matches the stored components of an active fingerprint: a rebind's candidate, as memory sees it. */
function contested(state: KeyState, identity: KeyIdentity, sent: Components): boolean {
  for (const [fingerprint, stored] of identity.components) {
    if (hasDevice(state, fingerprint) && componentsMatch(state.componentMatch, stored, sent)) return true
  }
  return false
}

/** The key's active fingerprints as memory holds them (what a seat decision in Postgres was decided from). */
export function deviceList(state: KeyState): readonly string[] {
  const d = state.devices
  return typeof d === 'string' ? [d] : d
}

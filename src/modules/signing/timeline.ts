// Which key signs for an account at a given moment, from its rows alone (no clock of its own, no I/O).
// One rule, used by every node's signer cache (signers.ts), the key set (service.ts) and the activation
// sweeper: the signer is the key with the latest activation time at or before `now` among the active
// key (its activated_at) and the pending keys scheduled for then (their activate_at); none → the root.
// A scheduled activation therefore happens on every node at its time, on that node's own clock, with
// no message at that moment (docs/decisions.md, "Signing keys").

export type SigningKeyState = 'pending' | 'active' | 'retired' | 'revoked'
export const SIGNING_KEY_STATES = ['pending', 'active', 'retired', 'revoked'] as const

export interface TimedKey {
  kid: string
  state: SigningKeyState
  activate_at: Date | null
  activated_at: Date | null
}

/**
 * When the key takes over (ms), or null when it never will (retired, revoked, pending with no time).
 * The active key signs "since always": its activated_at is the writer's clock, and a node whose clock
 * is behind must not wait for it; a scheduled key due before an activation was written down as active
 * before it (service.ts, `applyDue`), so no pending key is left behind the active one.
 */
export function takesOverAt(k: TimedKey): number | null {
  if (k.state === 'active') return Number.NEGATIVE_INFINITY
  if (k.state === 'pending' && k.activate_at !== null) return k.activate_at.getTime()
  return null
}

/** The kid signing at `now` (null: the root), and each key's state and activation time as of `now`. */
export function resolve<K extends TimedKey>(keys: readonly K[], now: number): { signer: string | null; keys: (K & { effective: SigningKeyState; since: Date | null })[] } {
  let signer: string | null = null
  let best = Number.NEGATIVE_INFINITY
  for (const k of keys) {
    const at = takesOverAt(k)
    if (at !== null && at <= now && at >= best) {
      best = at
      signer = k.kid
    }
  }
  return {
    signer,
    keys: keys.map((k) => {
      const at = takesOverAt(k)
      const started = at !== null && at <= now
      const effective: SigningKeyState = k.kid === signer ? 'active' : started ? 'retired' : k.state === 'active' ? 'retired' : k.state
      return { ...k, effective, since: k.state === 'pending' && started ? new Date(at!) : k.activated_at }
    }),
  }
}

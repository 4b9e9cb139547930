// The answers validate gives, built once where they repeat. A refusal never changes: one frozen object
// each. A valid answer changes only with its key's entry (a new device, a merged policy) and, once, when
// the key's term ends: the entry's object keeps the last one it gave (KeyState.answer) and gives it
// again while those are the same. Those objects exist only for keys in use (hot-state.ts), so saved
// answers cost memory for recently validated keys only, not for every key held. Each such answer also
// carries its JSON text under a symbol (JSON.stringify ignores symbol keys), so the door sends it
// without serializing again: measured on the hot path, the answer's object, two ISO date strings and
// its JSON were ≈0.9 µs of every valid call.
import type { Entitlements } from '../../core/entitlements'
import type { Reason, ValidateAnswer } from './model'

const TEXT = Symbol('json')

type WithText = ValidateAnswer & { [TEXT]?: string }

/** Freezes an answer with its JSON text beside it. */
function sealed<A extends ValidateAnswer>(answer: A): A {
  Object.defineProperty(answer, TEXT, { value: JSON.stringify(answer) })
  return Object.freeze(answer)
}

/** The answer's JSON text: the one stored with it when it is reused, else serialized now. */
export function answerText(answer: ValidateAnswer): string {
  return (answer as WithText)[TEXT] ?? JSON.stringify(answer)
}

export const REFUSED: Record<Reason, ValidateAnswer> = {
  not_found: sealed({ valid: false, reason: 'not_found' }),
  revoked: sealed({ valid: false, reason: 'revoked' }),
  suspended: sealed({ valid: false, reason: 'suspended' }),
  expired: sealed({ valid: false, reason: 'expired' }),
  device_already_used: sealed({ valid: false, reason: 'device_already_used' }),
  // never answered from here: its answer names the missing codes (service.ts `lacking`)
  entitlements_missing: sealed({ valid: false, reason: 'entitlements_missing', missing: [] }),
  activation_limit: sealed({ valid: false, reason: 'activation_limit' }),
  device_mismatch: sealed({ valid: false, reason: 'device_mismatch' }),
  // never answered from here: its answer carries the balance and the next refill (service.ts `exhausted`)
  credits_exhausted: sealed({ valid: false, reason: 'credits_exhausted', credits_remaining: 0, refills_at: null }),
}

/** What a valid answer says about expiry and what the key unlocks. */
export interface Terms {
  policyId: string | null
  plan: string | null
  expiresAt: number | null
  limit: number
  entitlements: Entitlements
  graceMs: number
  keep: boolean
}

/** Whether validate refuses the key for its expiry at `now`: past expires_at + grace, and not kept. */
export const expiryRefused = (t: Terms, now: number) => t.expiresAt !== null && !t.keep && t.expiresAt + t.graceMs <= now

type Valid = Extract<ValidateAnswer, { valid: true }>

/**
 * A valid answer built from `t` (a key just read from Postgres, or a metered key's: its balance moves
 * with every answer). `credits`: the metered key's balance after this call, null when unmetered.
 */
export function validAnswer(t: Terms, used: number, now: number, credits: number | null = null): Valid {
  const { expiresAt } = t
  return {
    valid: true,
    plan: t.plan,
    expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    activations_used: used,
    activation_limit: t.limit,
    policy_id: t.policyId,
    entitlements: t.entitlements,
    expired: expiresAt !== null && expiresAt <= now,
    grace_until: expiresAt === null || t.keep || t.graceMs === 0 ? null : new Date(expiresAt + t.graceMs).toISOString(),
    credits_remaining: credits,
  }
}

/** An unmetered hot entry's valid answer: the one it gave last when the count and the expired flag are the same. */
export function validAnswerOf(entry: Terms & { answer: object | null }, used: number, now: number): Valid {
  const last = entry.answer as Valid | null | undefined // undefined: a row read without the hot state (bench baseline (b))
  const expired = entry.expiresAt !== null && entry.expiresAt <= now
  if (last != null && last.activations_used === used && last.expired === expired) return last
  const answer = sealed(validAnswer(entry, used, now))
  entry.answer = answer
  return answer
}

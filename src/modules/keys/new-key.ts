// A new key's terms, one rule for the API's create (service.ts createKeyIn, a payment connector's
// purchase too) and the import (import-service.ts): which inherited settings it sets itself, its
// activation limit, its expiry (given, else its policy's duration from creation or from its first
// activation) and its credits (its own, else its policy's). Pure: the callers write the row.
import type { RefillRule } from '../../core/credits'
import { addPeriod, parsePeriod } from '../../core/durations'
import { SETTING_DEFAULTS, type FlaggedField } from '../../core/key-settings'

/** What a new key takes from its policy. */
export interface NewKeyPolicy {
  activation_limit: number
  duration: string | null
  expiry_basis: 'creation' | 'first_activation'
  credits: { initial: number; refill: RefillRule | null } | null
}

type Credits = { remaining: number; refill: RefillRule | null }

export interface NewKeyGiven<C extends Credits> {
  /** the flagged settings (core/key-settings.ts) the key sets itself: its own_fields when it has a policy */
  own: readonly FlaggedField[]
  activationLimit: number | null | undefined
  /** an explicit expiry (null: none given) */
  expiresAt: Date | null
  /** when its first device was activated (an import's activations), else null */
  firstActivation: Date | null
  /** its own credits (null = unmetered); undefined: its policy's */
  credits: C | null | undefined
}

export interface NewKeyTerms<C extends Credits> {
  ownFields: FlaggedField[]
  /** the column needs a number; with a policy and no own limit it is not read */
  activationLimit: number
  expiresAt: Date | null
  /** expiry_basis first_activation, no device yet: the duration its first activation adds */
  pendingDuration: string | null
  credits: C | Credits | null
}

export function newKeyTerms<C extends Credits>(k: NewKeyGiven<C>, policy: NewKeyPolicy | null, createdAt: Date): NewKeyTerms<C> {
  return {
    ownFields: policy === null ? [] : [...k.own],
    activationLimit: k.activationLimit ?? policy?.activation_limit ?? SETTING_DEFAULTS.activation_limit,
    ...expiryOf(k.expiresAt, k.firstActivation, policy, createdAt),
    credits: k.credits !== undefined ? k.credits : policy?.credits ? { remaining: policy.credits.initial, refill: policy.credits.refill } : null,
  }
}

function expiryOf(given: Date | null, firstActivation: Date | null, policy: NewKeyPolicy | null, createdAt: Date) {
  if (given !== null || policy === null || policy.duration === null) return { expiresAt: given, pendingDuration: null }
  // a policy's duration is checked when it is written: a period that does not parse gives no expiry
  const period = parsePeriod(policy.duration)
  if (typeof period === 'string') return { expiresAt: null, pendingDuration: null }
  if (policy.expiry_basis !== 'first_activation') return { expiresAt: new Date(addPeriod(createdAt.getTime(), period)), pendingDuration: null }
  if (firstActivation === null) return { expiresAt: null, pendingDuration: policy.duration }
  return { expiresAt: new Date(addPeriod(firstActivation.getTime(), period)), pendingDuration: null }
}

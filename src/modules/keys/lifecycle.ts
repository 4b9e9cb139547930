// A key's transitions, pure: (the key as read under its lock, a change) → the write and its event,
// nothing to do, or a refusal. No I/O: changeKey (service.ts) takes the lock, reads the key, asks here,
// writes, reads back, emits and says what to publish. The API's routes, the payment connectors
// (connectors/apply.ts) and the reinstate sweeper all go through it, so a rule (revoking is final, a
// dispute outranks a pause) is written once. docs/architecture.md, docs/decisions.md.
import { isDeepStrictEqual } from 'node:util'
import { FLAGGED, SETTING_DEFAULTS } from '../../core/key-settings'
import type { CreditsIn } from '../credits/model'
import type { Key, PatchKeyBody, Resettable } from './model'
import type { KeySettings } from './repo'
import { customerColumns, type Customer, type CustomerColumns } from '../../core/customer'

export type KeyEventType = 'key.revoked' | 'key.extended' | 'key.updated' | 'key.suspended' | 'key.reinstated' | 'key.reissued'

/** What a caller asks of a key. */
export type Change =
  /** Final; a second revoke changes nothing. */
  | { kind: 'revoke'; reason: string | null }
  /** The API's extend: the new expiry (future) or null (perpetual), written even when equal. */
  | { kind: 'extend'; expiresAt: Date | null }
  /** A subscription renewed: the period's end as the expiry, when it differs. */
  | { kind: 'renew'; expiresAt: Date }
  /** A subscription cancelled: the key expires at `at` unless it already expires by then. */
  | { kind: 'end'; at: Date }
  /** The API's suspend: the suspension as a whole (reason and until replace the current ones). */
  | { kind: 'suspend'; reason: string | null; until: Date | null }
  /** A payment provider's suspension: a dispute outranks a pause (a disputed key stays disputed). */
  | { kind: 'hold'; reason: 'subscription_paused' | 'disputed' }
  /**
   * Ends a suspension. `reason`: only a suspension of this reason (a provider ends what it began).
   * `dueAt`: only one whose suspended_until has come by then (the sweeper).
   */
  | { kind: 'reinstate'; reason?: string; dueAt?: Date }
  /** A new key value (its hash and prefix). */
  | { kind: 'reissue'; keyHash: string; keyPrefix: string }
  /** PATCH, with metadata, entitlements and credits as already checked. */
  | {
      kind: 'patch'
      input: PatchKeyBody
      metadata?: Record<string, unknown>
      entitlements?: Record<string, unknown>
      credits?: PatchCredits
      /** checked (core/customer.ts): replaces the whole customer; null clears it */
      customer?: Customer | null
    }

/** PATCH's credits as checked (undefined: not sent). */
export type PatchCredits = { wanted: { remaining: number; refill: unknown } | null; input: CreditsIn }

/** What changeKey writes to the key's row. */
export type Write =
  | { kind: 'revoke'; reason: string | null }
  | { kind: 'expiry'; expiresAt: Date | null }
  | { kind: 'suspend'; reason: string | null; until: Date | null }
  | { kind: 'reinstate' }
  | { kind: 'reissue'; keyHash: string; keyPrefix: string }
  | { kind: 'settings'; settings: KeySettings; credits?: CreditsIn }

export interface Refusal {
  code: 'key_revoked'
  message: string
}

export type Transition = { write: Write; event: KeyEventType } | { same: true } | { refused: Refusal }

/** The key as changeKey read it under its lock; `own` only for a patch (what the row stores). */
export interface KeyNow {
  key: Key
  own?: KeySettings & { policy_id: string | null }
}

const SAME: Transition = { same: true }
const revoked = (key: Key): Transition | null =>
  key.status === 'revoked' ? { refused: { code: 'key_revoked', message: `Key ${key.id} is revoked; revoking is final` } } : null
const iso = (d: Date | null) => (d === null ? null : d.toISOString())

export function transition(now: KeyNow, change: Change): Transition {
  const { key } = now
  const suspended = key.suspended_at !== null
  switch (change.kind) {
    case 'revoke':
      return key.status === 'revoked' ? SAME : { write: { kind: 'revoke', reason: change.reason }, event: 'key.revoked' }
    case 'extend':
      return revoked(key) ?? { write: { kind: 'expiry', expiresAt: change.expiresAt }, event: 'key.extended' }
    case 'renew':
      return revoked(key) ?? (key.expires_at === iso(change.expiresAt) ? SAME : { write: { kind: 'expiry', expiresAt: change.expiresAt }, event: 'key.extended' })
    case 'end':
      return (
        revoked(key) ??
        (key.expires_at !== null && new Date(key.expires_at) <= change.at ? SAME : { write: { kind: 'expiry', expiresAt: change.at }, event: 'key.extended' })
      )
    case 'suspend': {
      const refused = revoked(key)
      if (refused) return refused
      if (suspended && key.suspend_reason === change.reason && key.suspended_until === iso(change.until)) return SAME
      return { write: { kind: 'suspend', reason: change.reason, until: change.until }, event: 'key.suspended' }
    }
    case 'hold': {
      const refused = revoked(key)
      if (refused) return refused
      // a dispute outranks a pause: a paused key that is disputed stays suspended as disputed
      if (suspended && (key.suspend_reason === change.reason || key.suspend_reason === 'disputed')) return SAME
      return { write: { kind: 'suspend', reason: change.reason, until: null }, event: 'key.suspended' }
    }
    case 'reinstate':
      // a provider never brings a revoked key back (docs/decisions.md); the API answers it as is
      if (change.reason !== undefined) {
        const refused = revoked(key)
        if (refused) return refused
      }
      if (!suspended) return SAME
      if (change.reason !== undefined && key.suspend_reason !== change.reason) return SAME
      if (change.dueAt !== undefined && (key.suspended_until === null || new Date(key.suspended_until) > change.dueAt)) return SAME
      return { write: { kind: 'reinstate' }, event: 'key.reinstated' }
    case 'reissue':
      return revoked(key) ?? { write: { kind: 'reissue', keyHash: change.keyHash, keyPrefix: change.keyPrefix }, event: 'key.reissued' }
    case 'patch':
      return patch(now, change)
  }
}

const customerOwn = (own: CustomerColumns): CustomerColumns => ({
  customer_email: own.customer_email,
  customer_name: own.customer_name,
  customer_external_id: own.customer_external_id,
})

/**
 * PATCH: omitted fields keep their value; with a policy a value given becomes an override and `reset`
 * drops overrides (back to the policy's value; without a policy, to the default). Nothing changed → SAME.
 * A revoked key takes new settings but stays revoked.
 */
function patch({ key, own }: KeyNow, change: Extract<Change, { kind: 'patch' }>): Transition {
  if (!own) throw new Error('patch needs the key\'s own settings')
  const { input } = change
  const reset = new Set<Resettable>(input.reset ?? [])
  const withPolicy = own.policy_id !== null
  const ownFields = new Set(own.own_fields)
  for (const f of FLAGGED) {
    if (reset.has(f)) ownFields.delete(f)
    else if (input[f] !== undefined && withPolicy) ownFields.add(f)
  }
  const column = <T>(f: Resettable, value: T | undefined, stored: T, dflt: T): T => (reset.has(f) ? dflt : value === undefined ? stored : value)
  const next: KeySettings = {
    own_fields: [...ownFields].sort(),
    plan: column('plan', input.plan, own.plan, SETTING_DEFAULTS.plan),
    // with a policy the column is not read once the override is dropped: it keeps its number
    activation_limit: column('activation_limit', input.activation_limit, own.activation_limit, withPolicy ? own.activation_limit : SETTING_DEFAULTS.activation_limit),
    metadata: change.metadata ?? own.metadata,
    ...(change.customer === undefined ? customerOwn(own) : customerColumns(change.customer)),
    release_after_seconds: column('release_after_seconds', input.release_after_seconds, own.release_after_seconds, SETTING_DEFAULTS.release_after_seconds),
    deactivations_allowed: column('deactivations_allowed', input.deactivations_allowed, own.deactivations_allowed, SETTING_DEFAULTS.deactivations_allowed),
    entitlements: reset.has('entitlements') ? {} : ((change.entitlements as KeySettings['entitlements'] | undefined) ?? own.entitlements),
    // null = inherited (or the default): the stored value of a nullable setting, core/key-settings.ts
    grace_seconds: column('grace_seconds', input.grace_seconds, own.grace_seconds, null),
    after_expiry: column('after_expiry', input.after_expiry, own.after_expiry, null),
    component_match: column('component_match', input.component_match, own.component_match, null),
  }
  const { policy_id: _, ...before } = own
  const stored = { ...before, own_fields: [...own.own_fields].sort() }
  const credits =
    change.credits !== undefined &&
    !isDeepStrictEqual(change.credits.wanted, key.credits && { remaining: key.credits.remaining, refill: key.credits.refill })
  if (!credits && isDeepStrictEqual(next, stored)) return SAME
  return { write: { kind: 'settings', settings: next, ...(credits ? { credits: change.credits!.input } : {}) }, event: 'key.updated' }
}

// The wire mapping: the service's JSON answers (snake_case, ISO dates) turned into the results the
// client returns (camelCase, Date). The answers' shapes come from wire.ts, generated from the server's
// OpenAPI document (`bun run gen:client-types`). Only verified answers reach these functions.
import type { operations } from './wire.js'

type Answer<Op extends keyof operations> = operations[Op]['responses'][200]['content']['application/json']
export type ValidateAnswer = Answer<'postV1Validate'>
export type DevicesAnswer = Answer<'postV1Devices'>
export type DeactivateAnswer = Answer<'postV1Deactivate'>
type ValidAnswer = Extract<ValidateAnswer, { valid: true }>
type RefusalAnswer = Extract<ValidateAnswer, { valid: false }>

/**
 * Why the service refused a key (`valid: false`): the server's own list, as its OpenAPI document declares
 * it, and `device_mismatch` (docs/integrating.md, "Identifying machines"), named here until wire.ts is
 * generated from a service that declares it (then the name is simply there twice).
 */
export type Refusal = Extract<ValidateAnswer, { valid: false }>['reason'] | 'device_mismatch'

/** An entitlement's value: `true` (a feature), a number (a quota, e.g. 5 projects) or a string (a tier). */
export type EntitlementValue = ValidAnswer['entitlements'][string]
/** What a key unlocks, `{code: value}`: its effective entitlements (its policy's merged with its own). */
export type Entitlements = Readonly<Record<string, EntitlementValue>>

/**
 * Which refusals end grace (the stored answer is forgotten): every reason must be classified here. A
 * suspended key is not usable until reinstated (the next valid answer is stored again); a missing
 * entitlement says nothing about the key, only about what this call asked for; device_already_used (a
 * one-per-device trial this device already had) is final for this key here. credits_exhausted says
 * the balance is spent, not that the key is bad (and a metered call never falls back to a stored answer).
 * device_mismatch (machine identity refused this device: a clone, or a replaced fingerprint) is final here.
 */
const ENDS_GRACE: Record<Refusal, boolean> = {
  not_found: true,
  revoked: true,
  suspended: true,
  expired: true,
  entitlements_missing: false,
  device_already_used: true,
  activation_limit: true,
  credits_exhausted: false,
  device_mismatch: true,
}
export const endsGrace = (reason: Refusal): boolean => ENDS_GRACE[reason]
export const isRefusal = (reason: unknown): reason is Refusal => typeof reason === 'string' && Object.hasOwn(ENDS_GRACE, reason)

/** Looking up entitlements, on every result: a refused key (or license) unlocks nothing. */
export interface EntitlementLookup {
  /** True when the key (or license) has this entitlement, whatever its value; false on a refusal. */
  has(code: string): boolean
  /** The entitlement's value (`true`, a number or a string), or undefined when the key lacks it (or on a refusal). */
  entitlement(code: string): EntitlementValue | undefined
}

export type ValidResult = EntitlementLookup & {
  valid: true
  plan: string | null
  expiresAt: Date | null
  activationsUsed: number
  activationLimit: number
  /** The policy the key belongs to (what it inherits its settings from), or null. */
  policyId: string | null
  /** The key's effective entitlements (`{}` when none). */
  entitlements: Entitlements
  /** True only past `expiresAt`: during the key's grace (until `graceUntil`), or kept after expiry (`after_expiry: keep`). */
  expired: boolean
  /** When the key's grace after `expiresAt` ends; null when there is none. */
  graceUntil: Date | null
  /**
   * A metered key's balance after this call's cost, as the answering node knows it; null for an
   * unmetered key (and for stored answers signed before credits existed).
   */
  creditsRemaining: number | null
  /** True when this is the stored answer standing in for an unreachable service. */
  offline: boolean
  /** When the service signed this answer. */
  signedAt: Date
}

export type RefusedResult = EntitlementLookup &
  (
    | {
        valid: false
        reason: 'entitlements_missing'
        /** The codes of `requireEntitlements` the key lacks, in the order asked. */
        missing: string[]
        /** True when the stored answer (the service unreachable) lacks them, rather than the service. */
        offline: boolean
        signedAt: Date
      }
    | {
        valid: false
        reason: 'credits_exhausted'
        /** The balance left: less than the cost asked (nothing was spent). */
        creditsRemaining: number
        /** When the key's credits refill next; null when they do not refill. */
        refillsAt: Date | null
        offline: false
        signedAt: Date
      }
    | { valid: false; reason: Exclude<Refusal, 'entitlements_missing' | 'credits_exhausted'>; offline: false; signedAt: Date }
  )

export type ValidateResult = ValidResult | RefusedResult

export interface Device {
  fingerprint: string
  name: string | null
  appVersion: string | null
  country: string | null
  activatedAt: Date
  lastValidatedAt: Date | null
  /** This device (the caller's fingerprint). */
  current: boolean
}

export interface DevicesResult {
  /** The key's effective status: revoked > suspended > expired > active. */
  status: DevicesAnswer['status']
  activationLimit: number
  activationsUsed: number
  deactivationsAllowed: number | null
  deactivationsUsed: number
  devices: Device[]
}

export interface DeactivateResult {
  deactivated: boolean
  activationsUsed: number
  activationLimit: number
}

/**
 * `has` and `entitlement` as methods that are not enumerable: a result still serialises, compares and
 * spreads as its data (a spread copy loses them: look them up on the result itself).
 */
export function withLookup<T extends object>(result: T, entitlements: Entitlements): T & EntitlementLookup {
  const has = (code: string) => Object.hasOwn(entitlements, code)
  return Object.defineProperties(result, {
    has: { value: has },
    entitlement: { value: (code: string) => (has(code) ? entitlements[code] : undefined) },
  }) as T & EntitlementLookup
}

const NONE: Entitlements = Object.freeze({})

/** An entitlements object as the service or a license sends it; anything else counts as none. */
export function entitlementsOf(value: unknown): Entitlements {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return NONE
  return Object.freeze({ ...(value as Record<string, EntitlementValue>) })
}

/** The codes of `required` that `entitlements` lacks, in the order asked. */
export const missingOf = (entitlements: Entitlements, required: readonly string[]) => required.filter((code) => !Object.hasOwn(entitlements, code))

/** A valid answer. Stored answers signed before entitlements existed read as none, not expired, no grace. */
export function toValid(json: ValidAnswer, offline: boolean, signedAt: Date): ValidResult {
  const entitlements = entitlementsOf(json.entitlements)
  return withLookup(
    {
      valid: true as const,
      plan: json.plan ?? null,
      expiresAt: json.expires_at ? new Date(json.expires_at) : null,
      activationsUsed: json.activations_used,
      activationLimit: json.activation_limit,
      policyId: json.policy_id ?? null,
      entitlements,
      expired: json.expired === true,
      graceUntil: json.grace_until ? new Date(json.grace_until) : null,
      creditsRemaining: typeof json.credits_remaining === 'number' ? json.credits_remaining : null,
      offline,
      signedAt,
    },
    entitlements,
  )
}

/** A refusal: a verified answer of the service, or (entitlements_missing, offline) the stored answer's lack. */
export function toRefused(json: RefusalAnswer, offline: boolean, signedAt: Date): RefusedResult {
  if (json.reason === 'entitlements_missing') {
    const missing = Array.isArray(json.missing) ? [...json.missing] : []
    return withLookup({ valid: false as const, reason: json.reason, missing, offline, signedAt }, NONE)
  }
  if (json.reason === 'credits_exhausted') {
    const creditsRemaining = typeof json.credits_remaining === 'number' ? json.credits_remaining : 0
    const refillsAt = json.refills_at ? new Date(json.refills_at) : null
    return withLookup({ valid: false as const, reason: json.reason, creditsRemaining, refillsAt, offline: false as const, signedAt }, NONE)
  }
  return withLookup({ valid: false as const, reason: json.reason, offline: false as const, signedAt }, NONE)
}

export function toDevices(json: DevicesAnswer, fingerprint: string): DevicesResult {
  return {
    status: json.status,
    activationLimit: json.activation_limit,
    activationsUsed: json.activations_used,
    deactivationsAllowed: json.deactivations_allowed ?? null,
    deactivationsUsed: json.deactivations_used ?? 0,
    devices: (json.devices ?? []).map((d) => ({
      fingerprint: d.device_fingerprint,
      name: d.device_name ?? null,
      appVersion: d.app_version ?? null,
      country: d.country ?? null,
      activatedAt: new Date(d.activated_at),
      lastValidatedAt: d.last_validated_at ? new Date(d.last_validated_at) : null,
      current: d.device_fingerprint === fingerprint,
    })),
  }
}

export function toDeactivate(json: DeactivateAnswer): DeactivateResult {
  return { deactivated: json.deactivated === true, activationsUsed: json.activations_used, activationLimit: json.activation_limit }
}

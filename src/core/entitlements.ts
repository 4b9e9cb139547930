// Entitlements: what a key unlocks, as `{code: value}`. A code matches ^[a-z0-9][a-z0-9._:-]{0,63}$;
// a value is `true`, a finite number or a string of 1..200 characters. A key's own map merges over its
// policy's: `{code: value}` adds or overrides, `{code: null}` removes an inherited one; the effective
// set is policy ∪ key without the nulls. Pure rules, no I/O: the HTTP layer turns a message into a 400.

export type EntitlementValue = true | number | string
export type Entitlements = Readonly<Record<string, EntitlementValue>>
/** A key's own map: null removes a code its policy gives. */
export type OwnEntitlements = Readonly<Record<string, EntitlementValue | null>>

export const ENTITLEMENT_CODE = /^[a-z0-9][a-z0-9._:-]{0,63}$/
export const MAX_ENTITLEMENTS = 64
export const MAX_REQUIRED = 16

export interface EntitlementProblem {
  /** the code at fault, or null for the map as a whole */
  code: string | null
  message: string
}

/**
 * Checks a map as sent; `allowNull`: a key's own map (null removes an inherited code), not a policy's.
 * Returns every problem found (empty when the map is good).
 */
export function checkEntitlements(value: unknown, allowNull: boolean): EntitlementProblem[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [{ code: null, message: 'must be a JSON object' }]
  const entries = Object.entries(value as Record<string, unknown>)
  const problems: EntitlementProblem[] = []
  if (entries.length > MAX_ENTITLEMENTS) problems.push({ code: null, message: `must hold at most ${MAX_ENTITLEMENTS} entries` })
  for (const [code, v] of entries) {
    if (!ENTITLEMENT_CODE.test(code)) {
      problems.push({ code, message: 'a code is 1..64 characters of a-z, 0-9 and . _ : - (starting with a letter or digit)' })
      continue
    }
    const ok =
      v === true ||
      (typeof v === 'number' && Number.isFinite(v)) ||
      (typeof v === 'string' && v.length >= 1 && v.length <= 200) ||
      (allowNull && v === null)
    if (!ok) {
      problems.push({
        code,
        message: allowNull ? 'must be true, a finite number, a string of 1..200 characters, or null (removes an inherited code)' : 'must be true, a finite number or a string of 1..200 characters',
      })
    }
  }
  return problems
}

/** The effective set: the policy's map, then the key's own over it; a null removes the code. */
export function mergeEntitlements(policy: Entitlements | null, own: OwnEntitlements): Entitlements {
  const merged: Record<string, EntitlementValue> = { ...(policy ?? {}) }
  for (const [code, value] of Object.entries(own)) {
    if (value === null) delete merged[code]
    else merged[code] = value
  }
  return merged
}

/** The required codes the set lacks, in the order they were asked for (each once). */
export function missingEntitlements(effective: Entitlements, required: readonly string[]): string[] {
  const missing: string[] = []
  for (const code of required) if (!Object.hasOwn(effective, code) && !missing.includes(code)) missing.push(code)
  return missing
}

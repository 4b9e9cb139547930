// What a key inherits from its policy, declared once: each setting's API field, its column (the same
// name on license_keys and on policies), its default and how the key's own value meets the policy's.
// The SQL that merges key over policy (policies/repo.ts, effectiveSettings) is generated from this
// table, the key object's `overrides`, PATCH's `reset`, create and import read it, and the console's
// inherited-field lists too (this file imports only core/). Adding a setting: a row here, its type in
// SettingValues/OwnSettings, the model (TypeBox) and the logic that uses it. docs/architecture.md.
import { COMPONENT_MATCH, type ComponentMatch } from './component-match'
import { mergeEntitlements, type Entitlements, type OwnEntitlements } from './entitlements'

/**
 * How a key's own value meets its policy's:
 * - `flagged`: the key's column counts when the key has no policy or names the field in `own_fields`
 *   (the column always holds a value: activation_limit is not null), else the policy's value;
 * - `nullable`: the key's column when not null, else the policy's, else the default;
 * - `merged`: a map, the policy's with the key's own merged over it (a null removes a code);
 * - `policy`: the key cannot set it: the policy's, else the default.
 */
export type Inherit = 'flagged' | 'nullable' | 'merged' | 'policy'

/** The effective values of a key's inherited settings (what the key object and validate answer). */
export interface SettingValues {
  plan: string | null
  activation_limit: number
  release_after_seconds: number | null
  deactivations_allowed: number | null
  grace_seconds: number
  after_expiry: 'refuse' | 'keep'
  entitlements: Entitlements
  one_key_per_device: boolean
  /** machine identity: how the components sent must match a device's (core/component-match.ts) */
  component_match: ComponentMatch
}

export type SettingField = keyof SettingValues

/**
 * The form of a setting's value (besides null where the field allows it), as create, PATCH, import and
 * the console's forms check it: text of at most `max` characters, an integer in a range, one of some
 * words, a map (entitlements: checked by core/entitlements.ts) or a boolean.
 */
export type Form =
  | { type: 'text'; max: number }
  | { type: 'integer'; min: number; max: number }
  | { type: 'enum'; values: readonly string[] }
  | { type: 'map' }
  | { type: 'boolean' }

interface Spec<F extends SettingField = SettingField> {
  field: F
  column: string
  default: SettingValues[F]
  inherit: Inherit
  form: Form
}

const YEAR = 31_536_000

export const KEY_SETTINGS = [
  { field: 'plan', column: 'plan', default: null, inherit: 'flagged', form: { type: 'text', max: 64 } },
  { field: 'activation_limit', column: 'activation_limit', default: 3, inherit: 'flagged', form: { type: 'integer', min: 1, max: 10_000 } },
  { field: 'release_after_seconds', column: 'release_after_seconds', default: null, inherit: 'flagged', form: { type: 'integer', min: 60, max: YEAR } },
  { field: 'deactivations_allowed', column: 'deactivations_allowed', default: null, inherit: 'flagged', form: { type: 'integer', min: 0, max: 10_000 } },
  { field: 'grace_seconds', column: 'grace_seconds', default: 0, inherit: 'nullable', form: { type: 'integer', min: 0, max: YEAR } },
  { field: 'after_expiry', column: 'after_expiry', default: 'refuse', inherit: 'nullable', form: { type: 'enum', values: ['refuse', 'keep'] } },
  { field: 'entitlements', column: 'entitlements', default: {}, inherit: 'merged', form: { type: 'map' } },
  { field: 'one_key_per_device', column: 'one_key_per_device', default: false, inherit: 'policy', form: { type: 'boolean' } },
  { field: 'component_match', column: 'component_match', default: 'off', inherit: 'nullable', form: { type: 'enum', values: COMPONENT_MATCH } },
] as const satisfies readonly { [F in SettingField]: Spec<F> }[SettingField][]

// Compile-time: every field of SettingValues has a row (a row without a type fails above).
type Missing = Exclude<SettingField, (typeof KEY_SETTINGS)[number]['field']>
const _everyFieldHasARow: [Missing] extends [never] ? true : Missing = true
void _everyFieldHasARow

type Row = (typeof KEY_SETTINGS)[number]
/** The settings whose own value is a column that counts only when `own_fields` names it. */
export type FlaggedField = Extract<Row, { inherit: 'flagged' }>['field']
/** The settings a key may set itself over its policy (and PATCH `reset` may drop). */
export type OverridableField = Exclude<Row, { inherit: 'policy' }>['field']

export const FLAGGED = KEY_SETTINGS.filter((s) => s.inherit === 'flagged').map((s) => s.field) as readonly FlaggedField[]
export const OVERRIDABLE = KEY_SETTINGS.filter((s) => s.inherit !== 'policy').map((s) => s.field) as readonly OverridableField[]

/** The settings a key may set itself whose value is one column's scalar (all but the entitlements map). */
export type ScalarField = Exclude<OverridableField, Extract<Row, { inherit: 'merged' }>['field']>
export const SCALAR_OWN = KEY_SETTINGS.filter((s): s is Extract<Row, { field: ScalarField }> => s.inherit === 'flagged' || s.inherit === 'nullable')

/** Each setting's default: a key with no value of its own and no policy's. */
export const SETTING_DEFAULTS = Object.freeze(Object.fromEntries(KEY_SETTINGS.map((s) => [s.field, s.default]))) as Readonly<SettingValues>

/** What a key stores of its inherited settings (its own columns), and which flagged ones it sets. */
export interface OwnSettings {
  own_fields: readonly string[]
  plan: string | null
  activation_limit: number
  release_after_seconds: number | null
  deactivations_allowed: number | null
  grace_seconds: number | null
  after_expiry: 'refuse' | 'keep' | null
  entitlements: OwnEntitlements
  component_match: ComponentMatch | null
}

/** The values a policy gives (null: the key has none). */
export type PolicyValues = Omit<SettingValues, never>

/** A key's effective settings: its own over its policy's over the defaults (the rule of the table). */
export function effective(own: OwnSettings, policy: PolicyValues | null): SettingValues {
  const out: Record<string, unknown> = {}
  for (const s of KEY_SETTINGS) out[s.field] = inherited(s, own, policy)
  return out as unknown as SettingValues
}

function inherited(s: Row, own: OwnSettings, policy: PolicyValues | null): unknown {
  switch (s.inherit) {
    case 'flagged':
      return policy === null || own.own_fields.includes(s.field) ? own[s.field as FlaggedField] : policy[s.field]
    case 'nullable':
      return own[s.field as 'grace_seconds' | 'after_expiry' | 'component_match'] ?? policy?.[s.field] ?? s.default
    case 'merged':
      return mergeEntitlements(policy?.entitlements ?? null, own.entitlements)
    case 'policy':
      return policy?.[s.field] ?? s.default
  }
}

/**
 * What a key with a policy sets itself (the key object's `overrides`); {} for a key without a policy,
 * whose every value is its own.
 */
export function overridesOf(own: OwnSettings, hasPolicy: boolean): Partial<Record<OverridableField, unknown>> {
  if (!hasPolicy) return {}
  const o: Partial<Record<OverridableField, unknown>> = {}
  for (const s of KEY_SETTINGS) {
    if (s.inherit === 'flagged' && own.own_fields.includes(s.field)) o[s.field] = own[s.field]
    else if (s.inherit === 'nullable' && own[s.field] !== null) o[s.field] = own[s.field]
    else if (s.inherit === 'merged' && Object.keys(own[s.field]).length > 0) o[s.field] = own[s.field]
  }
  return o
}

/**
 * What is wrong with `value` for `form` (null when it is fine): the message a 400 gives under the
 * field's name. A map is checked by its own rules (core/entitlements.ts), not here.
 */
export function formProblem(form: Form, value: unknown): string | null {
  switch (form.type) {
    case 'text':
      return typeof value === 'string' && [...value].length <= form.max && !/[\u0000-\u001f\u007f-\u009f]/.test(value)
        ? null
        : `must be text of 0..${form.max} characters, no control characters`
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value) && value >= form.min && value <= form.max ? null : `must be an integer ${form.min}..${form.max}`
    case 'enum':
      return typeof value === 'string' && form.values.includes(value) ? null : `must be one of: ${form.values.join(', ')}`
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be true or false'
    case 'map':
      return null
  }
}

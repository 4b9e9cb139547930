// One import row → what the key will be, or every problem with it (field by field). Pure: what the
// account holds (products, policies) comes in as `Catalog`; duplicates across rows and against the
// database are the service's (import-service.ts).
import { IMPORTED_VALUE_RE, keyPrefixOf, normalizeKeyValue, portableKeyHash, sha256Hex } from '../../infra/crypto'
import { checkEntitlements } from '../../core/entitlements'
import type { RefillRule } from '../../core/credits'
import { AppError, type FieldError } from '../../core/errors'
import { checkMetadata, parseInstant } from '../../core/values'
import { checkCustomer, customerProblems, type Customer } from '../../core/customer'
import { checkCredits, type ImportCredits } from '../credits/service'
import { FLAGGED, formProblem, SCALAR_OWN, type FlaggedField, type Form, type OwnSettings, type ScalarField } from '../../core/key-settings'
import { ROW_FIELDS } from './import-parse'

export interface CatalogPolicy {
  product_id: string
  activation_limit: number
  release_after_seconds: number | null
  duration: string | null
  expiry_basis: 'creation' | 'first_activation'
  credits: { initial: number; refill: RefillRule | null } | null
}

/** What the account holds, for resolving a row's product and policy. */
export interface Catalog {
  productIds: Set<string>
  productBySlug: Map<string, string>
  policies: Map<string, CatalogPolicy>
}

export interface ImportActivation {
  fingerprint: string
  name: string | null
  appVersion: string | null
  activatedAt: Date
}

/** A row that passed every check. */
export interface CheckedRow {
  line: number
  externalId: string | null
  /** how the key is found: by its value's portable hash, or (hash-only import) by its SHA-256 */
  lookup: { kind: 'portable'; hash: string } | { kind: 'sha256'; sha256: string }
  /** the SHA-256 of the value, when known (a `key` row): a hash-only import of the same value is a duplicate */
  valueSha256: string | null
  keyPrefix: string
  productId: string
  policyId: string | null
  /** the settings the row gives (null: not given); the nullable ones only when the key sets them itself */
  settings: ImportSettings
  expiresAt: Date | null
  status: 'active' | 'revoked' | 'suspended'
  revokeReason: string | null
  suspendReason: string | null
  suspendedUntil: Date | null
  metadata: Record<string, unknown>
  /** who holds the key (core/customer.ts), null = not recorded */
  customer: Customer | null
  entitlements: Record<string, unknown>
  createdAt: Date | null
  /** the row's credits (null = unmetered); undefined when it gives none: its policy's apply, as on create */
  credits: ImportCredits | null | undefined
  /** with a policy: the settings the row sets itself (an export's `overrides` names them) */
  ownFields: FlaggedField[]
  activations: ImportActivation[]
}

const KNOWN = new Set<string>(ROW_FIELDS)
const HEX64 = /^[0-9a-fA-F]{64}$/
const FINGERPRINT = /^[0-9a-fA-F]{64}$/
const PLAIN = /^[^\u0000-\u001F\u007F-\u009F]*$/

type Fields = Record<string, unknown>

/** Runs one field's check, turning its thrown field error into a row problem. */
function attempt<T>(errors: FieldError[], field: string, check: () => T): T | undefined {
  try {
    return check()
  } catch (err) {
    const message = err instanceof AppError ? (err.extra.errors?.[0]?.message ?? err.detail) : 'is invalid'
    errors.push({ field, message })
    return undefined
  }
}

const text = (field: string, v: unknown, min: number, max: number): string => {
  if (typeof v !== 'string' || [...v].length < min || [...v].length > max || !PLAIN.test(v)) {
    throw new AppError('invalid_request', field, { errors: [{ field, message: `must be text of ${min}..${max} characters, no control characters` }] })
  }
  return v
}
const nullable = <T>(v: unknown, f: (v: unknown) => T): T | null => (v === null ? null : f(v))
/** A setting's value checked by its form (core/key-settings.ts), or the 400 naming the field. */
const formed = (field: string, form: Form, v: unknown): unknown => {
  const problem = formProblem(form, v)
  if (problem !== null) throw new AppError('invalid_request', field, { errors: [{ field, message: problem }] })
  return v
}

/** The settings as sent, one per scalar setting of the table (null: not given). */
export type ImportSettings = { [F in ScalarField]: OwnSettings[F] | null }

/** A nullable setting (grace, after expiry, the machine rule) is stored only when the key sets it itself. */
function ownOnly(settings: ImportSettings, own: (field: string) => boolean): ImportSettings {
  const out = { ...settings } as Record<ScalarField, unknown>
  for (const spec of SCALAR_OWN) if (spec.inherit === 'nullable' && !own(spec.field)) out[spec.field] = null
  return out as ImportSettings
}
const past = (field: string, v: unknown): Date => {
  const d = parseInstant(field, typeof v === 'string' ? v : '')
  if (d.getTime() > Date.now()) throw new AppError('invalid_request', field, { errors: [{ field, message: 'must be in the past' }] })
  return d
}

export function checkRow(line: number, f: Fields, catalog: Catalog): { row: CheckedRow } | { errors: FieldError[] } {
  const errors: FieldError[] = []
  for (const k of Object.keys(f)) if (!KNOWN.has(k)) errors.push({ field: k, message: 'is not a field of an import row' })
  const has = (k: string) => f[k] !== undefined

  // the key: exactly one of the three forms
  const forms = ['key', 'key_sha256', 'key_hash'].filter(has)
  let lookup: CheckedRow['lookup'] | undefined
  let valueSha256: string | null = null
  let keyPrefix = ''
  if (forms.length !== 1) {
    errors.push({ field: forms.length === 0 ? 'key' : forms.join('+'), message: 'exactly one of key, key_sha256 and key_hash is required' })
  } else if (has('key')) {
    const value = typeof f.key === 'string' ? f.key.trim() : null
    if (value === null || (normalizeKeyValue(value) === null && !IMPORTED_VALUE_RE.test(value))) {
      errors.push({ field: 'key', message: 'must be 6..256 characters without control characters' })
    } else {
      lookup = { kind: 'portable', hash: portableKeyHash(value)! }
      valueSha256 = sha256Hex(value)
      keyPrefix = keyPrefixOf(value)
    }
  } else if (has('key_sha256')) {
    if (typeof f.key_sha256 !== 'string' || !HEX64.test(f.key_sha256)) errors.push({ field: 'key_sha256', message: 'must be 64 hex characters' })
    else lookup = { kind: 'sha256', sha256: f.key_sha256.toLowerCase() }
  } else {
    if (typeof f.key_hash !== 'string' || !HEX64.test(f.key_hash)) errors.push({ field: 'key_hash', message: 'must be 64 hex characters' })
    else lookup = { kind: 'portable', hash: f.key_hash.toLowerCase() }
    if (has('key_prefix')) keyPrefix = attempt(errors, 'key_prefix', () => text('key_prefix', f.key_prefix, 0, 5)) ?? ''
  }

  const externalId = has('external_id') ? attempt(errors, 'external_id', () => nullable(f.external_id, (v) => text('external_id', v, 1, 200))) ?? null : null

  // the product: by policy, slug or id (with a slug, an id is the exporting installation's and is not read)
  let productId: string | undefined
  let policyId: string | null = null
  let policy: CatalogPolicy | undefined
  if (has('policy_id') && f.policy_id !== null) {
    policy = typeof f.policy_id === 'string' ? catalog.policies.get(f.policy_id) : undefined
    if (!policy) errors.push({ field: 'policy_id', message: 'names no policy of this account' })
    else {
      policyId = f.policy_id as string
      productId = policy.product_id
    }
  }
  const bySlug = has('product_slug') ? (typeof f.product_slug === 'string' ? catalog.productBySlug.get(f.product_slug) : undefined) : undefined
  if (has('product_slug') && bySlug === undefined) errors.push({ field: 'product_slug', message: 'names no product of this account' })
  else if (has('product_id') && !has('product_slug') && !(typeof f.product_id === 'string' && catalog.productIds.has(f.product_id))) {
    errors.push({ field: 'product_id', message: 'names no product of this account' })
  }
  const named = bySlug ?? (has('product_id') && !has('product_slug') ? (f.product_id as string) : undefined)
  if (named !== undefined && productId !== undefined && named !== productId) errors.push({ field: 'product_id', message: "must be the policy's product" })
  productId ??= named
  if (!has('policy_id') && !has('product_id') && !has('product_slug')) errors.push({ field: 'product_id', message: 'one of product_id, product_slug and policy_id is required' })

  const opt = <T>(k: string, check: (v: unknown) => T): T | null => (has(k) ? (attempt(errors, k, () => nullable(f[k], check)) ?? null) : null)
  // the key's own settings, each checked by its form in the table (core/key-settings.ts)
  const settings = {} as Record<ScalarField, unknown>
  for (const spec of SCALAR_OWN) settings[spec.field] = opt(spec.field, (v) => formed(spec.field, spec.form, v))
  const expiresAt = opt('expires_at', (v) => parseInstant('expires_at', typeof v === 'string' ? v : ''))
  const createdAt = opt('created_at', (v) => past('created_at', v))
  const status = opt('status', (v) => {
    // an export says `expired` for an active key past its expiry: expires_at carries that
    if (v === 'expired') return 'active'
    if (v !== 'active' && v !== 'revoked' && v !== 'suspended') {
      throw new AppError('invalid_request', '', { errors: [{ field: 'status', message: 'must be one of: active, revoked, suspended' }] })
    }
    return v
  }) ?? 'active'
  const revokeReason = opt('revoke_reason', (v) => text('revoke_reason', v, 0, 500))
  const suspendReason = opt('suspend_reason', (v) => text('suspend_reason', v, 0, 500))
  const suspendedUntil = opt('suspended_until', (v) => {
    const d = parseInstant('suspended_until', typeof v === 'string' ? v : '')
    if (d.getTime() <= Date.now()) throw new AppError('invalid_request', '', { errors: [{ field: 'suspended_until', message: 'must be in the future' }] })
    return d
  })
  const metadata = opt('metadata', (v) => checkMetadata('metadata', v)) ?? {}
  const customer = customerOfRow(f, errors)
  const entitlements = opt('entitlements', (v) => {
    const problems = checkEntitlements(v, true)
    if (problems.length > 0) {
      throw new AppError('invalid_request', '', { errors: [{ field: problems[0]!.code === null ? 'entitlements' : `entitlements.${problems[0]!.code}`, message: problems[0]!.message }] })
    }
    return v as Record<string, unknown>
  }) ?? {}
  let credits: ImportCredits | null | undefined
  if (has('credits')) {
    const checked = checkCredits(f.credits)
    if ('field' in checked) errors.push(checked)
    else credits = checked.credits
  }

  // with a policy: an export's `overrides` names the settings the key set itself; else every one given
  const given = FLAGGED.filter(has)
  const overrides = f.overrides !== null && typeof f.overrides === 'object' && !Array.isArray(f.overrides) ? (f.overrides as Fields) : null
  const own = (k: string) => policyId === null || overrides === null || k in overrides
  const ownFields = policyId === null ? [] : given.filter(own)
  // an export shows a policy key's effective entitlements; its own map is in `overrides`
  const ownEntitlements = policyId !== null && overrides !== null ? ((overrides.entitlements as Record<string, unknown> | undefined) ?? {}) : entitlements
  if (ownEntitlements !== entitlements && checkEntitlements(ownEntitlements, true).length > 0) {
    errors.push({ field: 'overrides.entitlements', message: 'must be an entitlements object, as an export writes it' })
  }

  const activations = has('activations') ? (attempt(errors, 'activations', () => checkActivations(f.activations)) ?? []) : []

  if (errors.length > 0 || lookup === undefined || productId === undefined) return { errors }
  return {
    row: {
      line,
      externalId,
      lookup,
      valueSha256,
      keyPrefix,
      productId,
      policyId,
      settings: ownOnly(settings as ImportSettings, own),
      expiresAt,
      status,
      revokeReason,
      suspendReason,
      suspendedUntil,
      metadata,
      customer,
      entitlements: ownEntitlements,
      createdAt,
      credits,
      ownFields,
      activations,
    },
  }
}

const CUSTOMER_COLUMNS = { customer_email: 'email', customer_name: 'name', customer_external_id: 'external_id' } as const

/**
 * The row's customer: a `customer` object, or (CSV) the columns customer_email, customer_name and
 * customer_external_id, whose problems are named by their column. Not both.
 */
function customerOfRow(f: Fields, errors: FieldError[]): Customer | null {
  const columns = Object.keys(CUSTOMER_COLUMNS).filter((c) => f[c] !== undefined && f[c] !== null) as (keyof typeof CUSTOMER_COLUMNS)[]
  if (f.customer !== undefined && columns.length > 0) {
    errors.push({ field: 'customer', message: `give customer or the columns ${columns.join(', ')}, not both` })
    return null
  }
  if (columns.length === 0) {
    if (f.customer === undefined) return null
    const problems = customerProblems('customer', f.customer)
    if (problems.length > 0) return (errors.push(...problems), null)
    return checkCustomer('customer', f.customer)
  }
  const given: Record<string, unknown> = {}
  for (const c of columns) given[CUSTOMER_COLUMNS[c]] = f[c]
  const problems = customerProblems('customer', given)
  const column = (field: string) => Object.entries(CUSTOMER_COLUMNS).find(([, k]) => field === `customer.${k}`)?.[0] ?? field
  if (problems.length > 0) return (errors.push(...problems.map((p) => ({ ...p, field: column(p.field) }))), null)
  return checkCustomer('customer', given)
}

function checkActivations(v: unknown): ImportActivation[] {
  const fail = (message: string) => new AppError('invalid_request', message, { errors: [{ field: 'activations', message }] })
  if (!Array.isArray(v)) throw fail('must be an array of {device_fingerprint, device_name?, app_version?, activated_at?}')
  // More devices than the limit is allowed, as on a key whose limit was lowered: they keep their
  // seats, and a new device is refused until enough are released.
  if (v.length > 10_000) throw fail(`holds ${v.length} devices; at most 10000`)
  const seen = new Set<string>()
  return v.map((a, i) => {
    const at = (m: string) => fail(`[${i}] ${m}`)
    if (a === null || typeof a !== 'object' || Array.isArray(a)) throw at('must be an object')
    const { device_fingerprint: fp, device_name: name, app_version: version, activated_at: activatedAt, ...rest } = a as Record<string, unknown>
    // an export writes each activation whole: its other fields are the old installation's
    void rest
    if (typeof fp !== 'string' || !FINGERPRINT.test(fp)) throw at('device_fingerprint must be 64 hex characters')
    const fingerprint = fp.toLowerCase()
    if (seen.has(fingerprint)) throw at('device_fingerprint appears twice')
    seen.add(fingerprint)
    if (name != null && (typeof name !== 'string' || [...name].length < 1 || [...name].length > 100 || !PLAIN.test(name))) {
      throw at('device_name must be 1..100 characters, no control characters')
    }
    if (version != null && (typeof version !== 'string' || [...version].length > 64 || !PLAIN.test(version))) {
      throw at('app_version must be at most 64 characters, no control characters')
    }
    let when = new Date()
    if (activatedAt != null) {
      const d = typeof activatedAt === 'string' ? new Date(activatedAt) : new Date(NaN)
      if (Number.isNaN(d.getTime()) || d.getTime() > Date.now()) throw at('activated_at must be a past timestamp')
      when = d
    }
    return { fingerprint, name: (name as string | null | undefined) ?? null, appVersion: (version as string | null | undefined) ?? null, activatedAt: when }
  })
}

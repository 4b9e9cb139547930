// Domain errors: what went wrong, as a code of the contract. Which HTTP status and problem document
// each code becomes is the HTTP layer's business (http/errors.ts); services and repos only throw.
import { isId, type IdPrefix } from './ids'

export const ERROR_CODES = [
  'invalid_request',
  'unauthorized',
  'plan_limit_reached',
  'plan_upgrade_required',
  'insufficient_scope',
  'not_found',
  'slug_taken',
  'key_revoked',
  'key_expired',
  'key_suspended',
  'policy_in_use',
  'device_already_used',
  'activation_limit',
  'deactivation_limit',
  'request_used',
  'invalid_deactivation',
  'key_unmetered',
  'idempotency_key_reused',
  'payload_too_large',
  'product_has_active_keys',
  'import_invalid',
  'last_full_access_key',
  'signing_key_limit',
  'signing_key_revoked',
  'rate_limited',
  'internal_error',
  'unavailable',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

export interface FieldError {
  field: string
  message: string
}

/** An import's bad row: its line as an editor shows it, its external_id, and every problem with it. */
export interface RowErrors {
  line: number
  external_id: string | null
  errors: FieldError[]
}

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly extra: { errors?: FieldError[]; retryAfter?: number; rows?: RowErrors[] } = {},
  ) {
    super(detail)
  }
}

export const invalid = (field: string, message: string) =>
  new AppError('invalid_request', `${field} ${message}`, { errors: [{ field, message }] })

export const notFound = (what: string, id: string) => new AppError('not_found', `No ${what} with id ${id}`)

/**
 * What `find` gives for a well-formed id of `prefix`, else 404 naming `what`: an id of another shape is
 * never looked up, and one that finds nothing (in the caller's account) is the same 404.
 */
export async function foundById<T>(prefix: IdPrefix, what: string, id: string, find: () => Promise<T | null>): Promise<T> {
  const found = isId(prefix, id) ? await find() : null
  if (found === null) throw notFound(what, id)
  return found
}

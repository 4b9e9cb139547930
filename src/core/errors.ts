// Domain errors: what went wrong, as a code of the contract. Which HTTP status and problem document
// each code becomes is the HTTP layer's business (http/errors.ts); services and repos only throw.

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

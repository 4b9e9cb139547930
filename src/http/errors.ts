// Domain errors as HTTP: the one code → status table (with each code's title and when it happens), and
// one envelope (RFC 9457 problem+json). The documented problem responses (http/responses.ts for a
// route's statuses, http/openapi-fixes.ts for their descriptions) are read from the same table.
import { AppError, type ErrorCode, type FieldError, type RowErrors } from '../core/errors'

export const ERRORS = {
  invalid_request: {
    status: 400,
    title: 'Invalid request',
    when: 'malformed JSON, a body or query that fails its schema, a NUL in the query, a malformed Keyward-Nonce',
  },
  unauthorized: { status: 401, title: 'Unauthorized', when: 'missing, malformed, unknown or revoked credential' },
  plan_limit_reached: { status: 402, title: 'Plan limit reached', when: "the account's plan allows no more of this" },
  plan_upgrade_required: { status: 402, title: 'Plan upgrade required', when: "the account's plan does not include this" },
  insufficient_scope: { status: 403, title: 'Insufficient scope', when: "the API key's scope does not allow this route" },
  not_found: { status: 404, title: 'Not found', when: 'unknown route, or an id not found in this account' },
  slug_taken: { status: 409, title: 'Slug taken', when: 'the product slug is already used in this account' },
  key_revoked: { status: 409, title: 'Key revoked', when: 'the key is revoked' },
  key_expired: { status: 409, title: 'Key expired', when: 'the key is expired' },
  key_suspended: { status: 409, title: 'Key suspended', when: 'the key is suspended' },
  policy_in_use: { status: 409, title: 'Policy in use', when: 'deleting a policy that keys reference' },
  device_already_used: {
    status: 409,
    title: 'Device already used',
    when: 'the device already used another key of a one_key_per_device policy',
  },
  activation_limit: { status: 409, title: 'Activation limit reached', when: "every one of the key's seats is taken" },
  key_unmetered: { status: 409, title: 'Key unmetered', when: 'changing the credits of a key that has none (credits null)' },
  deactivation_limit: { status: 409, title: 'Deactivation limit reached', when: "past the key's deactivations_allowed" },
  request_used: {
    status: 409,
    title: 'Request used',
    when: 'an air-gapped request code sent again after the activation it made was released (the device makes a new request)',
  },
  invalid_deactivation: {
    status: 400,
    title: 'Invalid deactivation',
    when: 'a deactivation code that is not a genuine one of a live air-gapped activation of this account (forged, altered, unknown, another account\'s): all alike',
  },
  idempotency_key_reused: {
    status: 409,
    title: 'Idempotency key reused',
    when: 'the same Idempotency-Key with a different request, or while its first request still runs',
  },
  last_full_access_key: { status: 409, title: 'Last full_access API key', when: "deleting the account's last full_access API key" },
  signing_key_limit: { status: 409, title: 'Signing key limit', when: 'creating a 17th signing key that is not revoked (revoke one first)' },
  signing_key_revoked: { status: 409, title: 'Signing key revoked', when: 'activating a revoked signing key (it can never sign again)' },
  payload_too_large: {
    status: 413,
    title: 'Payload too large',
    when: 'the request body is over the limit (64 KiB on most routes; 8 MiB and 10,000 rows for a key import)',
  },
  import_invalid: {
    status: 422,
    title: 'Import invalid',
    when: 'an import has bad rows: `rows` lists every one by line, with each field\'s problem; nothing was written',
  },
  product_has_active_keys: { status: 422, title: 'Product has active keys', when: 'deleting a product that still has an active key' },
  rate_limited: {
    status: 429,
    title: 'Rate limited',
    when:
      "the account's daily validate limit is reached, or its per-second rate on /v1/devices and /v1/deactivate; retry_after and Retry-After say when to try again",
  },
  internal_error: { status: 500, title: 'Internal error', when: 'a bug; the request id identifies it in the logs' },
  unavailable: { status: 503, title: 'Service unavailable', when: 'a dependency this call needs (Postgres) is unreachable; retry shortly' },
} as const satisfies Record<ErrorCode, { status: number; title: string; when: string }>

/** The statuses of the table. */
export type ErrorStatus = (typeof ERRORS)[ErrorCode]['status']

export const statusOf = (err: AppError): number => ERRORS[err.code].status

/** `[[code, entry], …]` in the table's order. */
export const errorEntries = () => Object.entries(ERRORS) as [ErrorCode, (typeof ERRORS)[ErrorCode]][]

export interface Problem {
  type: string
  title: string
  status: number
  detail: string
  code: ErrorCode
  request_id: string
  errors?: FieldError[]
  retry_after?: number
  rows?: RowErrors[]
}

export function problemBody(err: AppError, requestId: string): Problem {
  const entry = ERRORS[err.code]
  const body: Problem = {
    type: `https://keyward.dev/errors/${err.code}`,
    title: entry.title,
    status: entry.status,
    detail: err.detail,
    code: err.code,
    request_id: requestId,
  }
  if (body.status === 400) body.errors = err.extra.errors ?? []
  if (body.status === 429 && err.extra.retryAfter !== undefined) body.retry_after = err.extra.retryAfter
  if (err.extra.rows !== undefined) body.rows = err.extra.rows
  return body
}

export function problemResponse(err: AppError, requestId: string, headers: Record<string, string> = {}): Response {
  const h: Record<string, string> = {
    ...headers,
    'content-type': 'application/problem+json',
    'x-request-id': requestId,
  }
  const body = problemBody(err, requestId)
  if (body.status === 429 && err.extra.retryAfter !== undefined) h['retry-after'] = String(err.extra.retryAfter)
  return new Response(JSON.stringify(body), { status: body.status, headers: h })
}

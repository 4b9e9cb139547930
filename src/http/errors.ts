// Domain errors as HTTP: one code → status table, one envelope (RFC 9457 problem+json).
import { AppError, type ErrorCode, type FieldError } from '../core/errors'

export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  invalid_request: 400,
  unauthorized: 401,
  plan_limit_reached: 402,
  plan_upgrade_required: 402,
  insufficient_scope: 403,
  not_found: 404,
  slug_taken: 409,
  key_revoked: 409,
  key_expired: 409,
  activation_limit: 409,
  deactivation_limit: 409,
  idempotency_key_reused: 409,
  last_full_access_key: 409,
  payload_too_large: 413,
  product_has_active_keys: 422,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
}

export const statusOf = (err: AppError): number => ERROR_STATUS[err.code]

const TITLES: Record<ErrorCode, string> = {
  invalid_request: 'Invalid request',
  unauthorized: 'Unauthorized',
  plan_limit_reached: 'Plan limit reached',
  plan_upgrade_required: 'Plan upgrade required',
  insufficient_scope: 'Insufficient scope',
  not_found: 'Not found',
  slug_taken: 'Slug taken',
  key_revoked: 'Key revoked',
  key_expired: 'Key expired',
  activation_limit: 'Activation limit reached',
  deactivation_limit: 'Deactivation limit reached',
  idempotency_key_reused: 'Idempotency key reused',
  last_full_access_key: 'Last full_access API key',
  payload_too_large: 'Payload too large',
  product_has_active_keys: 'Product has active keys',
  rate_limited: 'Rate limited',
  internal_error: 'Internal error',
  unavailable: 'Service unavailable',
}

export interface Problem {
  type: string
  title: string
  status: number
  detail: string
  code: ErrorCode
  request_id: string
  errors?: FieldError[]
  retry_after?: number
}

export function problemBody(err: AppError, requestId: string): Problem {
  const body: Problem = {
    type: `https://keyward.dev/errors/${err.code}`,
    title: TITLES[err.code],
    status: statusOf(err),
    detail: err.detail,
    code: err.code,
    request_id: requestId,
  }
  if (body.status === 400) body.errors = err.extra.errors ?? []
  if (body.status === 429 && err.extra.retryAfter !== undefined) body.retry_after = err.extra.retryAfter
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

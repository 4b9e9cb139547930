// What a route declares beside its success answer: the problem responses it can give, whether it
// takes an Idempotency-Key, whether it is a client route (CORS) and signs its answers. Each problem
// status shares the one Problem schema; the docs (http/openapi-fixes.ts) turn them into references to
// one documented response per status.
import { errorEntries, type ErrorStatus } from './errors'
import { Problem } from './schema'

/** A status a route may declare: every status of the error table (http/errors.ts) but 500, which any route may answer. */
export type ProblemStatus = Exclude<ErrorStatus, 500>

export const PROBLEM_STATUSES: readonly ProblemStatus[] = [
  ...new Set(errorEntries().map(([, e]) => e.status).filter((s): s is ProblemStatus => s !== 500)),
]

/** `{400: Problem, 404: Problem, …}` for a route's `response` map (or a guard's). */
export function problems<const S extends readonly ProblemStatus[]>(...statuses: S): { [K in S[number]]: typeof Problem } {
  return Object.fromEntries(statuses.map((s) => [s, Problem])) as { [K in S[number]]: typeof Problem }
}

/**
 * Every route behind an API key or the operator token can answer these: 400 for a NUL in the query
 * (the kernel refuses it before routing), 401 and 403 for the credential, 503 when Postgres is
 * unreachable for a read or write the route needs. Declared once per module with `guard`.
 */
export const behindAuth = () => problems(400, 401, 403, 503)

/** A route that reads a JSON body: 400 for malformed JSON or a schema failure, 413 past the size limit. */
export const withBody = () => problems(400, 413)

/** Marks a text answer's schema with its media types (the key export: NDJSON or CSV): the docs list it under those. */
export const TEXT_TYPES_MARK = 'x-keyward-content-types'
/** Marks an answer's schema with the headers it carries beyond X-Request-Id (OpenAPI header objects by name): the docs list them. */
export const ANSWER_HEADERS_MARK = 'x-keyward-answer-headers'

/** Marks a create route that takes `Idempotency-Key` (http/idempotency.ts); spread into `detail`. */
export const IDEMPOTENT_MARK = 'x-keyward-idempotent'
export const IDEMPOTENT = { [IDEMPOTENT_MARK]: true } as const

/**
 * Marks a client route (docs/api.md, "CORS": a shipped app calls it with the key holder's credentials, from any
 * origin); spread into `detail`. The one declaration of it: http/client-answers.ts answers its CORS
 * preflight and puts the CORS headers on every answer, and the docs (http/openapi-fixes.ts) document both.
 */
export const CLIENT_MARK = 'x-keyward-client'
export const CLIENT = { [CLIENT_MARK]: true } as const

/**
 * Marks a client route whose answers are signed when the request sends `Keyward-Nonce`
 * (http/client-answers.ts, docs/api.md, "Signed answers"); spread into `detail`. The docs add the request header and
 * `Keyward-Signature` on every answer.
 */
export const SIGNED_MARK = 'x-keyward-signed'
export const SIGNED = { ...CLIENT, [SIGNED_MARK]: true } as const

/**
 * Marks a route whose body reaches it as raw bytes (a signature covers them: app.ts RAW_BODIES), so it
 * declares no body schema to the framework: the docs (http/openapi-fixes.ts) document `schema` as its
 * JSON body and `headers` as its required request headers. Spread `rawBody(...)` into `detail`.
 */
export const RAW_BODY_MARK = 'x-keyward-raw-body'
export const rawBody = (schema: unknown, headers: { name: string; description: string }[]) => ({ [RAW_BODY_MARK]: { schema, headers } })

/** What a route's `detail` (or its operation in the document) declares with CLIENT and SIGNED: null for any other route. */
export function clientRouteOf(detail: unknown): { signed: boolean } | null {
  const marks = detail as Record<string, unknown> | null | undefined
  if (marks?.[CLIENT_MARK] !== true) return null
  return { signed: marks[SIGNED_MARK] === true }
}

/** A route that answers 204 with no body once `work` is done (the deletes). */
export async function noContent(set: { status?: number | string }, work: Promise<unknown>): Promise<void> {
  await work
  set.status = 204
}

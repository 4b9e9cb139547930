// What a route declares beside its success answer: the problem responses it can give, and whether it
// takes an Idempotency-Key. Each problem status shares the one Problem schema; the docs (http/docs.ts)
// turn them into references to one documented response per status.
import { Problem } from './schema'

export const PROBLEM_STATUSES = [400, 401, 402, 403, 404, 409, 413, 422, 429, 503] as const
export type ProblemStatus = (typeof PROBLEM_STATUSES)[number]

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

/** Marks a create route that takes `Idempotency-Key` (http/idempotency.ts); spread into `detail`. */
export const IDEMPOTENT = { 'x-keyward-idempotent': true } as const

/**
 * Marks a route whose answers are signed when the request sends `Keyward-Nonce` (http/client-answers.ts,
 * API-2 §4); spread into `detail`. The docs add the request header and `Keyward-Signature` on every answer.
 */
export const SIGNED = { 'x-keyward-signed': true } as const

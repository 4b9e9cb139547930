// The routes a shipped app calls with the key holder's credentials (API-2 §4, §5): CORS on exactly
// those four, and signed answers on the three that take a nonce. One implementation for both doors:
// the validate fast path (modules/validation/fast-path.ts) calls these functions itself, and every
// route Elysia serves goes through `clientAnswers`, a wrapper around the framework's fetch handler
// (`app.wrap`), so the framework's own answers (body schema 400, 403 from the auth macro, 404,
// the kernel's 413) are covered without a hook per route. Adding a route to CLIENT_ROUTES is all it
// takes to give it CORS (and a signature when `signed`).
//
// Signature: `Keyward-Signature: alg=ed25519, kid=<kid>, t=<unix ms>, sig=<base64>` over the UTF-8 of
// "keyward-answer/v1\n" + path + "\n" + nonce + "\n" + t + "\n" + the exact response body bytes,
// with the account's offline signing key (the one GET /v1/offline/public-key publishes).
import { sign, type KeyObject } from 'node:crypto'
import { AppError, invalid } from '../core/errors'
import type { Authenticator, Principal } from '../core/principal'
import { problemResponse } from './errors'
import { requestIdOf } from './kernel'

export const NONCE_HEADER = 'keyward-nonce'
export const SIGNATURE_HEADER = 'keyward-signature'
const NONCE = /^[A-Za-z0-9_-]{16,128}$/
const DOMAIN = 'keyward-answer/v1\n'

/** Headers every answer of a client route carries, with or without `Origin` (API-2 §13). */
export const CORS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'keyward-signature, x-request-id, retry-after',
})

const CORS = CORS_HEADERS as Record<string, string>

/** The client routes (API-2 §5) by path: their methods, and whether a nonce gets a signed answer (§4). */
export const CLIENT_ROUTES: ReadonlyMap<string, { methods: string; signed: boolean }> = new Map([
  ['/v1/validate', { methods: 'POST', signed: true }],
  ['/v1/deactivate', { methods: 'POST', signed: true }],
  ['/v1/devices', { methods: 'POST', signed: true }],
  ['/v1/offline/public-key', { methods: 'GET', signed: false }],
])

/** What signs an account's answers: its offline signing key (modules/offline/signing-keys.ts). */
export interface AnswerKey {
  readonly kid: string
  readonly privateKey: KeyObject
}
export interface AnswerKeys {
  /** Synchronous once the account's key is in the node's memory; a promise while it is loaded. */
  keyFor(accountId: string): AnswerKey | Promise<AnswerKey>
}

/**
 * The nonce a request sent: null without the header; a 400 (never signed) when it is not 16..128 of
 * [A-Za-z0-9_-] (empty included).
 */
export function nonceOf(headers: Headers): string | null {
  const nonce = headers.get(NONCE_HEADER)
  if (nonce === null) return null
  if (!NONCE.test(nonce)) throw invalid(`headers.${NONCE_HEADER}`, 'must be 16 to 128 characters of A-Z, a-z, 0-9, "_" and "-"')
  return nonce
}

/** The `Keyward-Signature` value for an answer of `path` to `nonce` whose body is `body` (a string is sent as UTF-8). */
export function signatureOf(key: AnswerKey, path: string, nonce: string, body: string | Uint8Array, t = Date.now()): string {
  const head = `${DOMAIN}${path}\n${nonce}\n${t}\n`
  // One string and one encode for the usual JSON text; bytes (a read-back body) are appended as they are.
  const bytes = typeof body === 'string' ? Buffer.from(head + body, 'utf8') : Buffer.concat([Buffer.from(head, 'utf8'), body])
  return `alg=ed25519, kid=${key.kid}, t=${t}, sig=${sign(null, bytes, key.privateKey).toString('base64')}`
}

/**
 * `response` signed for the caller of `authorization`, or as it is when the answer may not or cannot be
 * signed: a 401, a caller that is not known, or a key that cannot be loaded (Postgres unreachable on a
 * node that never loaded it: the answer goes out unsigned, and a verifying client treats it as a failure).
 * For answers built elsewhere (problems, the framework's answers): reads the body back once.
 */
export async function signed(
  response: Response,
  keys: AnswerKeys,
  principals: Authenticator,
  caller: Principal | null | undefined,
  authorization: string | null,
  path: string,
  nonce: string,
): Promise<Response> {
  if (response.status === 401) return response
  try {
    let principal: Principal | null | Promise<Principal | null> = caller ?? principals.authenticate(authorization)
    if (principal instanceof Promise) principal = await principal
    if (principal === null) return response
    let key = keys.keyFor(principal.accountId)
    if (key instanceof Promise) key = await key
    const body = new Uint8Array(await response.arrayBuffer())
    const out = new Response(body, { status: response.status, headers: response.headers })
    out.headers.set(SIGNATURE_HEADER, signatureOf(key, path, nonce, body))
    return out
  } catch {
    return response // the body is not read when signing fails before it (the key or the caller could not be loaded)
  }
}

/** `/v1/x/?q` → `/v1/x`: a request's path without its query and trailing slash (routing accepts both forms). */
function routePath(url: string): string {
  let start = 0
  if (url.charCodeAt(0) !== 47 /* "/" */) {
    const scheme = url.indexOf('://')
    start = scheme === -1 ? -1 : url.indexOf('/', scheme + 3)
    if (start === -1) return '/'
  }
  const q = url.indexOf('?', start)
  let end = q === -1 ? url.length : q
  if (end - start > 1 && url.charCodeAt(end - 1) === 47) end--
  return url.slice(start, end)
}

function preflight(methods: string, requestId: string): Response {
  return new Response(null, {
    status: 204,
    headers: {
      ...CORS_HEADERS,
      'access-control-allow-methods': `${methods}, OPTIONS`,
      'access-control-allow-headers': 'authorization, content-type, keyward-nonce, x-request-id',
      'access-control-max-age': '86400',
      'x-request-id': requestId,
    },
  })
}

function withCors(response: Response): Response {
  try {
    for (const name in CORS_HEADERS) response.headers.set(name, CORS_HEADERS[name]!)
    return response
  } catch {
    // Headers of a Response that is not ours to change (immutable): copy it.
    const copy = new Response(response.body, response)
    for (const name in CORS_HEADERS) copy.headers.set(name, CORS_HEADERS[name]!)
    return copy
  }
}

type Handler = (request: Request) => unknown

/**
 * For `app.wrap(...)` (Elysia calls it as `hoc(handler, request)(request)` on every request it serves).
 * Any other path gets the handler itself back: one path scan, no allocation.
 */
export function clientAnswers(keys: AnswerKeys, principals: Authenticator) {
  async function answer(handler: Handler, request: Request, path: string, route: { methods: string; signed: boolean }): Promise<Response> {
    // Answered here, before the kernel and authentication: a browser sends no credentials in a preflight.
    if (request.method === 'OPTIONS') return preflight(route.methods, requestIdOf(request))
    let nonce: string | null = null
    if (route.signed) {
      try {
        nonce = nonceOf(request.headers)
      } catch (err) {
        if (!(err instanceof AppError)) throw err
        return problemResponse(err, requestIdOf(request), CORS)
      }
    }
    let response = (await handler(request)) as Response
    if (nonce !== null) response = await signed(response, keys, principals, null, request.headers.get('authorization'), path, nonce)
    return withCors(response)
  }
  return function clientAnswersHoc(handler: Handler, request: Request): Handler {
    const path = routePath(request.url)
    const route = CLIENT_ROUTES.get(path)
    return route === undefined ? handler : (r: Request) => answer(handler, r, path, route)
  }
}

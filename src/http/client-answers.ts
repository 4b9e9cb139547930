// The routes a shipped app calls with the key holder's credentials (API-2 §4, §5): CORS on every
// route declared CLIENT, and signed answers on those declared SIGNED (http/responses.ts; the declaration
// sits in the route's `detail`, where the OpenAPI document reads it too). One implementation for both
// doors: the validate fast path (modules/validation/fast-path.ts) calls these functions itself, and
// every route Elysia serves goes through `clientAnswers`, a wrapper around the framework's fetch
// handler (`app.wrap`), so the framework's own answers (body schema 400, 403 from the auth macro, 404,
// the kernel's 413) are covered without a hook per route.
//
// The signed message (v3: bound to the signer's kid and the request body) is specified once, in
// docs/api.md ("Signed answers"); `signatureOf` builds it. An answer signed by a signing key (not the
// root) carries its certificate in Keyward-Certificate, so a client holding only the root verifies it.
import { createHash, sign, type KeyObject } from 'node:crypto'
import { AppError, invalid } from '../core/errors'
import type { Authenticator, Principal } from '../core/principal'
import { problemResponse } from './errors'
import { BODY_LIMIT, readBody, requestIdOf, type AnswerLog } from './kernel'
import { routePath } from './request-path'
import { clientRouteOf } from './responses'

export const NONCE_HEADER = 'keyward-nonce'
export const SIGNATURE_HEADER = 'keyward-signature'
export const CERTIFICATE_HEADER = 'keyward-certificate'
const NONCE = /^[A-Za-z0-9_-]{16,128}$/
const DOMAIN = 'keyward-answer/v3\n'

/** Headers every answer of a client route carries, with or without `Origin` (API-2 §13). */
export const CORS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'keyward-signature, keyward-certificate, x-request-id, retry-after',
})

/** What a preflight of a client route answers besides CORS_HEADERS (`methods`: the route's own, e.g. "POST"). */
export const preflightHeaders = (methods: string): Record<string, string> => ({
  'access-control-allow-methods': `${methods}, OPTIONS`,
  'access-control-allow-headers': 'authorization, content-type, keyward-nonce, x-request-id',
  'access-control-max-age': '86400',
})

const CORS = CORS_HEADERS as Record<string, string>

/** What signs an account's answers: its current signer (modules/signing/signers.ts). */
export interface AnswerKey {
  readonly kid: string
  readonly privateKey: KeyObject
  /** The signer's KWCERT1 certificate, sent as Keyward-Certificate; null when the signer is the root. */
  readonly certificate: string | null
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

/** `request_sha256` of the signed message: lowercase hex SHA-256 of the exact request body bytes received. */
export const requestDigestOf = (body: Uint8Array): string => createHash('sha256').update(body).digest('hex')

/** What one signed answer is bound to (docs/api.md, "Signed answers"). */
export interface SignedFor {
  /** The route's path, without query or trailing slash (e.g. /v1/validate). */
  readonly path: string
  readonly nonce: string
  /** requestDigestOf(the request body bytes). */
  readonly requestDigest: string
}

/** The `Keyward-Signature` value for an answer whose body is `body` (a string is sent as UTF-8). */
export function signatureOf(key: AnswerKey, to: SignedFor, body: string | Uint8Array, t = Date.now()): string {
  const head = `${DOMAIN}${key.kid}\n${to.path}\n${to.nonce}\n${t}\n${to.requestDigest}\n`
  // One string and one encode for the usual JSON text; bytes (a read-back body) are appended as they are.
  const bytes = typeof body === 'string' ? Buffer.from(head + body, 'utf8') : Buffer.concat([Buffer.from(head, 'utf8'), body])
  return `alg=ed25519, kid=${key.kid}, t=${t}, sig=${sign(null, bytes, key.privateKey).toString('base64')}`
}

export interface SignOptions extends SignedFor {
  readonly keys: AnswerKeys
  readonly principals: Authenticator
  /** The caller when the door already knows it; otherwise found again from `authorization`. */
  readonly caller?: Principal | null
  readonly authorization: string | null
}

/**
 * `response` signed for its caller, or as it is when the answer may not or cannot be signed: a 401, a
 * caller that is not known, or a key that cannot be loaded (Postgres unreachable on a node that never
 * loaded it: the answer goes out unsigned, and a verifying client treats it as a failure).
 * For answers built elsewhere (problems, the framework's answers): reads the body back once.
 */
export async function signed(response: Response, o: SignOptions): Promise<Response> {
  if (response.status === 401) return response
  try {
    let principal: Principal | null | Promise<Principal | null> = o.caller ?? o.principals.authenticate(o.authorization)
    if (principal instanceof Promise) principal = await principal
    if (principal === null) return response
    let key = o.keys.keyFor(principal.accountId)
    if (key instanceof Promise) key = await key
    const body = new Uint8Array(await response.arrayBuffer())
    const out = new Response(body, { status: response.status, headers: response.headers })
    out.headers.set(SIGNATURE_HEADER, signatureOf(key, o, body))
    if (key.certificate !== null) out.headers.set(CERTIFICATE_HEADER, key.certificate)
    return out
  } catch {
    return response // the body is not read when signing fails before it (the key or the caller could not be loaded)
  }
}

function preflight(methods: string, requestId: string): Response {
  return new Response(null, { status: 204, headers: { ...CORS_HEADERS, ...preflightHeaders(methods), 'x-request-id': requestId } })
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
type RouteLike = { method: string; path: string; hooks?: { detail?: unknown } }
interface ClientRoute {
  /** "POST" or "GET, POST": the route's methods, for the preflight. */
  methods: string
  signed: boolean
}

/** The client routes among `routes`, by path (trailing slash dropped): read from their CLIENT/SIGNED declaration. */
export function clientRoutesOf(routes: readonly RouteLike[]): Map<string, ClientRoute> {
  const out = new Map<string, ClientRoute>()
  for (const r of routes) {
    const declared = clientRouteOf(r.hooks?.detail)
    if (declared === null) continue
    const path = routePath(r.path)
    const known = out.get(path)
    if (known) out.set(path, { methods: `${known.methods}, ${r.method}`, signed: known.signed || declared.signed })
    else out.set(path, { methods: r.method, signed: declared.signed })
  }
  return out
}

export interface ClientAnswersOptions {
  readonly keys: AnswerKeys
  readonly principals: Authenticator
  /** The app's routes (Elysia's `app.routes`), read once at the first request, when every module is mounted. */
  readonly routes: () => readonly RouteLike[]
  /** Where the answers made here (preflights, a malformed nonce, an oversized body) are logged and timed. */
  readonly log: AnswerLog
}

/**
 * For `app.wrap(...)` (Elysia calls it as `hoc(handler, request)(request)` on every request it serves).
 * Any other path gets the handler itself back: one path scan and one Map lookup, no allocation.
 */
export function clientAnswers(o: ClientAnswersOptions) {
  let table: Map<string, ClientRoute> | null = null

  /** An answer made here, before the kernel (which logs every answer it makes): logged the same way. */
  function own(request: Request, path: string, t0: number, response: Response): Response {
    o.log(request.method, path, response.status, t0, response.headers.get('x-request-id') ?? '')
    return response
  }

  async function answer(handler: Handler, request: Request, path: string, route: ClientRoute): Promise<Response> {
    const t0 = performance.now()
    // Answered here, before the kernel and authentication: a browser sends no credentials in a preflight.
    if (request.method === 'OPTIONS') return own(request, path, t0, preflight(route.methods, requestIdOf(request)))
    let nonce: string | null = null
    let requestDigest: string | null = null
    if (route.signed) {
      try {
        nonce = nonceOf(request.headers)
        // The signature covers the exact body bytes: read them here (under the body limit), then hand
        // the framework a request holding the same bytes. A declared length over the limit is left to
        // the kernel's 413, unsigned: that body was not received.
        const declared = Number(request.headers.get('content-length') ?? 0)
        if (nonce !== null && !(declared > BODY_LIMIT)) {
          const bytes = await readBody(request, BODY_LIMIT)
          requestDigest = requestDigestOf(bytes)
          request = new Request(request, { body: bytes })
        }
      } catch (err) {
        if (!(err instanceof AppError)) throw err
        return own(request, path, t0, problemResponse(err, requestIdOf(request), CORS))
      }
    }
    let response = (await handler(request)) as Response
    if (nonce !== null && requestDigest !== null) {
      response = await signed(response, {
        keys: o.keys,
        principals: o.principals,
        authorization: request.headers.get('authorization'),
        path,
        nonce,
        requestDigest,
      })
    }
    return withCors(response)
  }

  return function clientAnswersHoc(handler: Handler, request: Request): Handler {
    table ??= clientRoutesOf(o.routes())
    const path = routePath(request.url)
    const route = table.get(path)
    return route === undefined ? handler : (r: Request) => answer(handler, r, path, route)
  }
}

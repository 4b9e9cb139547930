// POST /v1/validate served straight from Bun.serve's router (see routes.ts for the Elysia route that
// documents it). Elysia's per-request machinery costs a measurable share of throughput on the hottest
// route (see the bench); this path calls the kernel's and the auth macro's own checks (http/kernel.ts,
// http/auth.ts) in the same order, then the same engine: one implementation, two doors.
//   nonce (400) → content-length limit → query → request id → auth (401/403) → JSON (400/413) → schema (400) → engine → answer
// With a Keyward-Nonce the answer is signed (http/client-answers.ts; the format: docs/api.md, "Signed
// answers"): the account's key is fetched right after authentication (from memory once warm), so the
// engine never runs for an answer that could not be signed; the body is read as bytes, whose SHA-256
// the signature covers; then one Ed25519 signature over the JSON text. Without one, the only added
// work is one header lookup; CORS headers are static on the reused Headers object.
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValidationError } from 'elysia'
import { invalid } from '../../core/errors'
import type { Principal } from '../../core/principal'
import type { Deps } from '../../deps'
import { authorize } from '../../http/auth'
import {
  CORS_HEADERS,
  nonceOf,
  requestDigestOf,
  SIGNATURE_HEADER,
  signatureOf,
  CERTIFICATE_HEADER,
  signed,
  type AnswerKey,
  type AnswerKeys,
} from '../../http/client-answers'
import { isDraining } from '../../http/drain'
import { problemResponse } from '../../http/errors'
import {
  BODY_LIMIT,
  checkDeclaredLength,
  checkJsonObject,
  checkQuery,
  notJson,
  parseJson,
  readBody,
  readJson,
  requestIdOf,
  toAppError,
} from '../../http/kernel'
import { fastRouteLatency } from '../../infra/metrics'
import { answerText } from './answers'
import { ValidateBody } from './model'
import type { ValidationEngine } from './service'

const checkBody = TypeCompiler.Compile(ValidateBody)
const ROUTE = '/v1/validate'
const JSON_HEADERS = 'application/json;charset=utf-8' // as Elysia answers every other route

export type ServeHandler = (request: Request, server?: object | null) => Promise<Response>

const CORS = CORS_HEADERS as Record<string, string>

/**
 * The digest of a request whose body was not read before its answer (a problem): read now, within the
 * limit. Null when the body cannot be had: over the limit (declared, or once read) or already consumed.
 */
async function digestOfUnread(request: Request): Promise<string | null> {
  if (request.bodyUsed || Number(request.headers.get('content-length') ?? 0) > BODY_LIMIT) return null
  try {
    return requestDigestOf(await readBody(request))
  } catch {
    return null
  }
}

export function fastValidate(deps: Deps, engine: ValidationEngine, keys: AnswerKeys): ServeHandler {
  const { principals, log, accessLog } = deps
  const latency = fastRouteLatency.route('POST', ROUTE)
  // Response copies its headers when built, so one Headers object serves every answer (a native
  // copy: measured ≈0.5 µs cheaper than a plain object's properties converted on every response).
  const answerHeaders = new Headers({ 'content-type': JSON_HEADERS, ...CORS_HEADERS })
  const answerInit = { headers: answerHeaders }

  return async function validateRoute(request: Request, server?: object | null): Promise<Response> {
    const t0 = performance.now()
    const now = Date.now() // one wall-clock reading for the request id and auth (the engine reads its own once the body is in)
    const requestId = requestIdOf(request, now)
    let response: Response
    let nonce: string | null = null
    let caller: Principal | undefined
    let requestDigest: string | null = null // of the body bytes, when the answer is signed
    try {
      const headers = request.headers
      nonce = nonceOf(headers)
      const length = headers.get('content-length')
      const declared = checkDeclaredLength(length, BODY_LIMIT)
      checkQuery(request.url)
      let principal = authorize(principals, headers.get('authorization'), 'validate', now)
      if (principal instanceof Promise) principal = await principal
      caller = principal
      let key: AnswerKey | null = null
      if (nonce !== null) {
        const loading = keys.keyFor(principal.accountId)
        key = loading instanceof Promise ? await loading : loading
      }
      let body: unknown
      if (nonce !== null) {
        const bytes = await readBody(request)
        requestDigest = requestDigestOf(bytes)
        body = parseJson(bytes)
      } else if (length === null) body = await readJson(request)
      else if (declared === 0) body = {}
      else {
        // A declared length (within the limit) lets Bun's own request.json() read it: measured ≈2 µs
        // cheaper than bytes + a fatal decoder + JSON.parse (inline: one async frame fewer). It turns
        // invalid UTF-8 into U+FFFD instead of failing, which here is harmless or refused: a key
        // holding one cannot be a key (not_found), the fingerprint pattern rejects it, a product id
        // matches none (not_found), and app_version, the one string stored, is refused below.
        try {
          body = await request.json()
        } catch {
          throw notJson()
        }
        body = checkJsonObject(body)
      }
      if (!checkBody.Check(body)) throw toAppError('VALIDATION', new ValidationError('body', checkBody, body), log, requestId)
      if (body.app_version != null && body.app_version.includes('\uFFFD')) throw invalid('body.app_version', 'must be valid UTF-8')
      let answer = engine.validate(principal, body, headers.get(deps.config.countryHeader))
      if (answer instanceof Promise) answer = await answer
      answerHeaders.set('x-request-id', requestId)
      const text = answerText(answer) // serialized once per answer that repeats (answers.ts)
      response = new Response(text, answerInit)
      if (key !== null) {
        response.headers.set(SIGNATURE_HEADER, signatureOf(key, { path: ROUTE, nonce: nonce!, requestDigest: requestDigest! }, text))
        if (key.certificate !== null) response.headers.set(CERTIFICATE_HEADER, key.certificate)
      }
    } catch (err) {
      response = problemResponse(toAppError('UNKNOWN', err, log, requestId), requestId, CORS)
      // Signed like every answer after the nonce check (API-2 §13) whose request body was received;
      // signed() leaves 401s alone and finds the caller of a 403 (or of a check that came before
      // authentication) again.
      if (nonce !== null && response.status !== 401) {
        requestDigest ??= await digestOfUnread(request)
        if (requestDigest !== null) {
          const authorization = request.headers.get('authorization')
          response = await signed(response, { keys, principals, caller, authorization, path: ROUTE, nonce, requestDigest })
        }
      }
    }
    if (isDraining(server)) response.headers.set('connection', 'close') // shutting down: see http/drain.ts
    const seconds = (performance.now() - t0) / 1000
    const status = response.status
    latency.observe(status, seconds)
    accessLog.write('POST', ROUTE, status, Math.round(seconds * 1e5) / 100, requestId)
    return response
  }
}

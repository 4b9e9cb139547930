// Cross-cutting HTTP behaviour for every route: request ids, the body limit (64 KiB unless a route is
// given more), the NUL check of the query, JSON parsing (at most MAX_JSON_DEPTH levels deep, see
// core/json-depth.ts), one error envelope (problem+json) and one
// access-log line per request. The checks are exported: the validate fast path calls the same ones.
import { Elysia } from 'elysia'
import type { TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { isConnectionError } from '../infra/db'
import { newRequestId } from '../infra/crypto'
import type { Logger } from '../infra/log'
import { httpDuration } from '../infra/metrics'
import { isDraining } from './drain'
import { AppError, invalid, type FieldError } from '../core/errors'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../core/json-depth'
import { problemResponse, statusOf } from './errors'
import { routePath } from './request-path'

/** The body limit of every route that is not given another (docs/api.md, "Offline licenses"). */
export const BODY_LIMIT = 64 * 1024
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

const started = new WeakMap<Request, number>()

/** `/healthz` or `/healthz/` (parsed only when a query holds a NUL, so no cost on other requests). */
const isLiveness = (url: string) => routePath(url) === '/healthz'

export function requestIdOf(request: Request, now = Date.now()): string {
  const given = request.headers.get('x-request-id')
  return given !== null && SANE_REQUEST_ID.test(given) ? given : newRequestId(now)
}

/**
 * Reads a body as JSON under the size limit; an empty body is `{}` (so optional bodies may be omitted).
 * Streams the body so a chunked upload without content-length cannot make us buffer more than the
 * limit. Every body in the contract is a JSON object, so anything else (array, string, null) is 400
 * rather than being silently coerced; strings may not hold NUL, which Postgres cannot store.
 */
export async function readJson(request: Request, limit = BODY_LIMIT): Promise<unknown> {
  checkDeclaredLength(request.headers.get('content-length'), limit)
  return parseJson(await readBody(request, limit))
}

/** A body's bytes as JSON (see readJson): empty is `{}`; invalid UTF-8 or JSON, or too deep, is 400. */
export function parseJson(buf: Uint8Array): object {
  if (buf.byteLength === 0) return {}
  let text: string
  try {
    text = utf8.decode(buf)
  } catch {
    throw notJson()
  }
  // Before JSON.parse: parsing 8 MiB of brackets alone holds the event loop for over half a second.
  if (nestsDeeperThan(text)) throw tooDeep()
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw notJson()
  }
  return checkJsonObject(value, text)
}

export const tooDeep = (field = 'body') =>
  new AppError('invalid_request', `JSON may nest at most ${MAX_JSON_DEPTH} levels deep`, {
    errors: [{ field, message: `must not nest objects or arrays more than ${MAX_JSON_DEPTH} levels deep` }],
  })

/** CSV and NDJSON bodies (the key import) arrive as text; every other body is JSON. */
const TEXT_TYPES = new Set(['text/csv', 'application/x-ndjson', 'application/ndjson'])
export const isTextBody = (contentType: string | null) =>
  contentType !== null && TEXT_TYPES.has(contentType.split(';')[0]!.trim().toLowerCase())

/** A text body (see isTextBody) under the size limit: UTF-8 without NUL, else 400. */
export async function readText(request: Request, limit = BODY_LIMIT): Promise<string> {
  checkDeclaredLength(request.headers.get('content-length'), limit)
  let text: string
  try {
    text = utf8.decode(await readBody(request, limit))
  } catch (err) {
    if (err instanceof AppError) throw err
    throw invalid('body', 'must be UTF-8 text')
  }
  if (text.includes('\u0000')) throw invalid('body', 'must not contain NUL characters')
  return text
}

export const notJson = () =>
  new AppError('invalid_request', 'The request body is not valid JSON', { errors: [{ field: 'body', message: 'must be valid JSON' }] })

/**
 * A parsed body as the contract wants it: an object at most MAX_JSON_DEPTH deep, every string and key
 * storable (see unstorable). `text`, when the caller has it, was already checked for depth (parseJson),
 * and a NUL or a lone surrogate can only be in it as an escape (`\u0000`, `\udXXX`: JSON.parse refuses a
 * raw NUL, and UTF-8 decoding cannot yield a lone surrogate): the walk over the value runs only then.
 * Without it (the validate fast path lets Bun parse a body of at most 64 KiB) the walk checks all.
 */
export function checkJsonObject(value: unknown, text?: string): object {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid('body', 'must be a JSON object')
  if (text !== undefined && !MAY_BE_UNSTORABLE.test(text)) return value
  // The walk that names the field builds a path string per property: only run it once we know.
  if (hasUnstorable(value, 1)) throw invalid(findUnstorable(value, 'body') ?? 'body', UNSTORABLE)
  return value
}

/** Stateless without `stream: true`, so one decoder serves every request. */
const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * 413 when the declared `content-length` is over `limit`, before anything is read (or authenticated);
 * returns the declared length (0 when none; a malformed one is left to the HTTP parser).
 */
export function checkDeclaredLength(contentLength: string | null, limit: number): number {
  const declared = contentLength === null ? 0 : Number(contentLength)
  if (declared > limit) throw tooLarge(limit)
  return declared
}

/** A NUL in a query value can never be valid and Postgres cannot store it: refused up front, on every route. */
export function checkQuery(url: string) {
  const q = url.indexOf('?')
  // Liveness reads no query and must answer 200 whatever a probe appends to it (docs/api.md, "Operations").
  if (q !== -1 && url.includes('%00', q) && !isLiveness(url)) throw invalid('query', 'must not contain NUL characters')
}

/**
 * A body's exact bytes, at most `limit` of them (413 past it). Call checkDeclaredLength first: a
 * declared length is trusted to bound the read.
 */
export async function readBody(request: Request, limit = BODY_LIMIT): Promise<Uint8Array<ArrayBuffer>> {
  // A declared length (already checked against the limit) bounds what the HTTP parser delivers, so one
  // buffered read is safe, and much cheaper than iterating the stream (it matters on the validate route).
  // Checked before touching `request.body`, which would materialise a ReadableStream.
  if (request.headers.has('content-length')) return request.bytes()
  if (!request.body) return new Uint8Array(0)
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength
    if (size > limit) throw tooLarge(limit)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks, size)
}

/**
 * Text Postgres cannot store: NUL (in text or jsonb), and a lone UTF-16 surrogate, which JSON can spell
 * (`"\ud800"`) but jsonb refuses and UTF-8 cannot encode. Checked once for every JSON a request brings
 * (docs/api.md, "Errors"), so no route meets it as a 500 when it writes.
 */
export const unstorable = (s: string) => s.includes('\u0000') || !s.isWellFormed()
export const UNSTORABLE = 'must not contain NUL characters or lone UTF-16 surrogates'

/** JSON text that may spell unstorable text: the escape of a NUL or of any surrogate (a pair too: rare). */
const MAY_BE_UNSTORABLE = /\\u(0000|[dD][89a-fA-F])/

/** Whether a string or key is unstorable; throws tooDeep past MAX_JSON_DEPTH (`depth`: the level of `value`). */
function hasUnstorable(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return unstorable(value)
  if (value === null || typeof value !== 'object') return false
  if (depth > MAX_JSON_DEPTH) throw tooDeep()
  if (Array.isArray(value)) {
    // by index: `for…in` makes a string per index (seconds for an 8 MiB array)
    for (let i = 0; i < value.length; i++) if (hasUnstorable(value[i], depth + 1)) return true
    return false
  }
  for (const k in value) if (unstorable(k) || hasUnstorable((value as Record<string, unknown>)[k], depth + 1)) return true
  return false
}

/** The path of the first string (or object key) that cannot be stored (see unstorable) under `path`, or null. */
export function findUnstorable(value: unknown, path: string): string | null {
  const at = unstorableAt(value)
  return at === null ? null : [path, ...at.reverse()].filter(Boolean).join('.')
}

/** The steps to the first unstorable string or key inside `value`, innermost first (built only on the way back from a hit). */
function unstorableAt(value: unknown): string[] | null {
  if (typeof value === 'string') return unstorable(value) ? [] : null
  if (value === null || typeof value !== 'object') return null
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableAt(value[i])
      if (found) return (found.push(String(i)), found)
    }
    return null
  }
  for (const k in value) {
    if (unstorable(k)) return []
    const found = unstorableAt((value as Record<string, unknown>)[k])
    if (found) return (found.push(k), found)
  }
  return null
}

const tooLarge = (limit: number) => new AppError('payload_too_large', `Request bodies are limited to ${limit} bytes`)

type SchemaLike = { anyOf?: { const?: unknown }[] }
type ValidationLike = { type?: string; all?: { path?: string; message?: string; summary?: string; schema?: SchemaLike }[] }

/** TypeBox says "Expected union value" for enums; name the accepted values instead. */
function describeFailure(e: { message?: string; summary?: string; schema?: SchemaLike }): string {
  const options = e.schema?.anyOf?.map((s) => s.const).filter((v) => v !== undefined)
  if (options && options.length > 0 && options.length === e.schema?.anyOf?.length) {
    return `must be one of: ${options.join(', ')}`
  }
  return e.summary || e.message || 'is invalid'
}

type Failure = NonNullable<ValidationLike['all']>[number] & { value?: unknown }

/**
 * A value that failed a union of an object (or array) and null, e.g. `credits: {remaining: "x"}`: TypeBox
 * stops at the union ("should be one of object, null"). When the value has the kind of one branch, that
 * branch's own failures name the field inside (`body.credits.remaining`): every 400 names its field.
 */
function deepen(e: Failure, depth = 0): Failure[] {
  const branches = (e.schema as { anyOf?: TSchema[] } | undefined)?.anyOf
  if (!branches || depth > 4 || e.value === null || typeof e.value !== 'object') return [e]
  const kind = Array.isArray(e.value) ? 'array' : 'object'
  const branch = branches.find((b) => (b as { type?: string }).type === kind)
  if (!branch) return [e]
  let inner: Failure[]
  try {
    inner = [...Value.Errors(branch, e.value)].map((i) => ({ path: `${e.path ?? ''}${i.path}`, message: i.message, schema: i.schema as SchemaLike, value: i.value }))
  } catch {
    return [e] // a schema TypeBox cannot check on its own (an unregistered format): the union's message stays
  }
  return inner.length ? inner.flatMap((i) => deepen(i, depth + 1)) : [e]
}

function validationError(err: ValidationLike): AppError {
  // Elysia checks query parameters one by one ("property") and drops their names.
  const where = err.type === 'property' ? 'query' : (err.type ?? 'body')
  const seen = new Set<string>()
  const errors: FieldError[] = (err.all ?? [])
    .flatMap((e) => deepen(e as Failure))
    .map((e) => ({ field: [where, ...(e.path ?? '').split('/').filter(Boolean)].join('.'), message: describeFailure(e) }))
    .filter((e) => !seen.has(`${e.field} ${e.message}`) && !!seen.add(`${e.field} ${e.message}`))
  const first = errors[0]
  return new AppError('invalid_request', first ? `${first.field}: ${first.message}` : `Invalid ${where}`, { errors })
}

/** Maps anything thrown to an AppError; unknown errors become a logged, detail-free 500. */
export function toAppError(code: string | number, error: unknown, log: Logger, requestId: string): AppError {
  if (error instanceof AppError) return error
  if (code === 'VALIDATION') return validationError(error as ValidationLike)
  if (code === 'NOT_FOUND') return new AppError('not_found', 'No such route')
  if (code === 'PARSE') {
    // Elysia wraps whatever our parser threw (413, not JSON, not an object) in a ParseError.
    const cause = (error as { cause?: unknown }).cause
    if (cause instanceof AppError) return cause
    return new AppError('invalid_request', 'The request body could not be parsed', { errors: [{ field: 'body', message: 'must be valid JSON' }] })
  }
  // Safety net: text Postgres cannot store (NUL) that slipped past the kernel's checks is the caller's fault.
  const pgCode = (error as { code?: unknown } | null)?.code
  if (pgCode === '22021' || pgCode === '22P05') {
    return new AppError('invalid_request', 'The request holds characters that cannot be stored', {
      errors: [{ field: 'request', message: 'must not contain NUL characters' }],
    })
  }
  if (isConnectionError(error)) {
    log.warn({ request_id: requestId, err: String(error) }, 'dependency unavailable')
    return new AppError('unavailable', 'A dependency needed for this call is unavailable; retry shortly')
  }
  log.error({ request_id: requestId, err: error }, 'unhandled error')
  return new AppError('internal_error', 'Something went wrong; the request id identifies it in our logs')
}

/**
 * Logs and times one answer, with the status the client received: one access-log line and one
 * observation of the latency histogram, labelled by route pattern (never the raw path: ids would make
 * one series per request). `t0` is `performance.now()` when the request arrived.
 */
export type AnswerLog = (method: string, route: string, status: number, t0: number, requestId: string) => void

export function answerLog(log: Logger): AnswerLog {
  return (method, route, status, t0, requestId) => {
    const ms = performance.now() - t0
    httpDuration.labels(method, route, String(status)).observe(ms / 1000)
    log.info({ method, route, status, ms: Math.round(ms * 100) / 100, request_id: requestId })
  }
}

/**
 * `bodyLimits`: the routes given another body limit than BODY_LIMIT, by path (e.g. the offline-license
 * sync route, docs/api.md, "Offline licenses"). Looked up before routing, so the 413 comes first on those routes too.
 */
export function kernel(
  log: Logger,
  bodyLimits: ReadonlyMap<string, number> = new Map(),
  /** Path prefixes whose bodies reach the route as raw bytes (signed payloads), with their limit. */
  rawBodies: ReadonlyMap<string, number> = new Map(),
  /** Routes whose every body reaches them as text, JSON too: they parse it in slices themselves (the import). */
  textBodies: ReadonlySet<string> = new Set(),
) {
  /** Requests on a route with its own limit (only those: the others read BODY_LIMIT). */
  const limits = new WeakMap<Request, number>()
  const raw = new WeakSet<Request>()
  const asText = new WeakSet<Request>()
  const logAnswer = answerLog(log)
  return new Elysia({ name: 'keyward.kernel' })
    .onRequest(({ request, set, server }) => {
      started.set(request, performance.now())
      set.headers['x-request-id'] = requestIdOf(request)
      if (isDraining(server)) set.headers.connection = 'close' // shutting down: see drain.ts
      let limit = BODY_LIMIT
      if (bodyLimits.size > 0) {
        const own = bodyLimits.get(routePath(request.url))
        if (own !== undefined) limits.set(request, (limit = own))
      }
      if (textBodies.size > 0 && textBodies.has(routePath(request.url))) asText.add(request)
      if (rawBodies.size > 0) {
        const path = routePath(request.url)
        for (const [prefix, own] of rawBodies) {
          if (!path.startsWith(prefix)) continue
          limits.set(request, (limit = own))
          raw.add(request)
        }
      }
      checkDeclaredLength(request.headers.get('content-length'), limit)
      checkQuery(request.url)
    })
    .onParse({ as: 'global' }, ({ request }) => {
      if (raw.has(request)) return readBody(request, limits.get(request)!)
      const limit = limits.get(request) ?? BODY_LIMIT
      return asText.has(request) || isTextBody(request.headers.get('content-type')) ? readText(request, limit) : readJson(request, limit)
    })
    .onError({ as: 'global' }, ({ code, error, set, request }) => {
      const requestId = String(set.headers['x-request-id'] ?? requestIdOf(request))
      const appError = toAppError(code, error, log, requestId)
      // What onAfterResponse logs: Elysia leaves its own guess there (500, 422, or 200 before routing).
      set.status = statusOf(appError)
      const passthrough: Record<string, string> = {}
      for (const [k, v] of Object.entries(set.headers)) if (k !== 'content-type') passthrough[k] = String(v)
      return problemResponse(appError, requestId, passthrough)
    })
    .onAfterResponse({ as: 'global' }, ({ request, set, route, responseValue }) => {
      const t0 = started.get(request) ?? performance.now()
      const status = responseValue instanceof Response ? responseValue.status : Number(set.status ?? 200)
      logAnswer(request.method, route || 'unmatched', status, t0, String(set.headers['x-request-id']))
    })
}

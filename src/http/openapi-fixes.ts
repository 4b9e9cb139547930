// The fixes that complete the OpenAPI document @elysiajs/openapi generates, one named function each,
// applied in order by `fixDocument` (http/docs.ts serves the result at /docs/json). The plugin renders
// a few things wrong or leaves them out for this app; what each fix supplies is said above it.
import type { TSchema } from '@sinclair/typebox'
import { CORS_HEADERS, preflightHeaders } from './client-answers'
import { errorEntries } from './errors'
import { CLIENT_MARK, clientRouteOf, IDEMPOTENT_MARK, PROBLEM_STATUSES, RAW_BODY_MARK, SIGNED_MARK, TEXT_TYPES_MARK } from './responses'
import { Problem } from './schema'

type Json = Record<string, any>
export type RouteLike = { method: string; path: string; hooks?: { body?: unknown } }

/** `/v1/keys/:id/` → `/v1/keys/{id}`: the contract's path form (routing accepts both slash forms). */
export const docPath = (path: string) => path.replace(/:([^/]+)/g, '{$1}').replace(/(.)\/$/, '$1')

const json = (schema: unknown) => JSON.parse(JSON.stringify(schema))

/** The name of each problem status's shared response (`#/components/responses/<name>`). */
const RESPONSE_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  402: 'PaymentRequired',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  413: 'PayloadTooLarge',
  422: 'UnprocessableContent',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
}

/** One documented problem response per status, described by the codes the error table gives that status. */
function problemResponses(): Record<string, { name: string; description: string; headers?: Json }> {
  const out: Record<string, { name: string; description: string; headers?: Json }> = {}
  for (const status of PROBLEM_STATUSES) {
    const codes = errorEntries().filter(([, e]) => e.status === status)
    out[status] = {
      name: RESPONSE_NAMES[status] ?? `Status${status}`,
      description: codes.map(([code, e]) => `${code}: ${e.when}`).join('; '),
      ...(status === 429 ? { headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } } } : {}),
    }
  }
  return out
}
const PROBLEMS = problemResponses()

/** The CORS headers of every answer of a client route, by their names in CORS_HEADERS. */
const CORS_ANSWER_HEADERS: Json = {
  'Access-Control-Allow-Origin': { $ref: '#/components/headers/AccessControlAllowOrigin' },
  'Access-Control-Expose-Headers': { $ref: '#/components/headers/AccessControlExposeHeaders' },
}
const SIGNATURE_HEADER: Json = {
  'Keyward-Signature': { $ref: '#/components/headers/KeywardSignature' },
  'Keyward-Certificate': { $ref: '#/components/headers/KeywardCertificate' },
}
const REQUEST_ID_HEADER: Json = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } }

const fixed = (value: string) => ({ type: 'string', enum: [value] })

const COMPONENTS: Json = {
  headers: {
    RequestId: {
      description: "The request's id: the caller's X-Request-Id when it sent a sane one (1..128 of [A-Za-z0-9._:-]), else generated",
      schema: { type: 'string' },
    },
    RetryAfter: { description: 'Seconds until a call may succeed again: the next UTC midnight for the daily validate limit, a second or more for the holder routes\' rate', schema: { type: 'integer' } },
    KeywardSignature: {
      description:
        'Sent when the request carried a well-formed Keyward-Nonce (every answer after authentication whose request body was ' +
        'received: not a 401, not the 400 for a malformed nonce, not a 413). `alg=ed25519, kid=<kid>, t=<unix ms>, sig=<standard base64>`: ' +
        'an Ed25519 signature over the UTF-8 of "keyward-answer/v3\\n" + kid + "\\n" + path (e.g. /v1/validate) + "\\n" + nonce + "\\n" + t + "\\n" + ' +
        'the lowercase hex SHA-256 of the exact request body bytes + "\\n" + the exact response body bytes, with the account\'s ' +
        'current signer: its active signing key (Keyward-Certificate then carries its certificate), or its root (GET /v1/offline/public-key, same kid). ' +
        'The format is specified in docs/api.md, "Signed answers".',
      schema: { type: 'string', pattern: '^alg=ed25519, kid=[0-9a-f]+, t=[0-9]+, sig=[A-Za-z0-9+/]+={0,2}$' },
    },
    KeywardCertificate: {
      description:
        'Sent with Keyward-Signature when the signer is a signing key, not the root: its KWCERT1 certificate, signed by the root ' +
        '(docs/api.md, "Certificates"), so a client holding only the pinned root verifies the answer with no extra request.',
      schema: { type: 'string', pattern: '^KWCERT1\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$' },
    },
    IdempotentReplayed: {
      description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key and body',
      schema: { type: 'string', enum: ['true'] },
    },
    AccessControlAllowOrigin: {
      description: 'CORS: a client route answers any origin (with or without an Origin header)',
      schema: fixed(CORS_HEADERS['access-control-allow-origin']!),
    },
    AccessControlExposeHeaders: {
      description: 'CORS: the answer headers a page may read',
      schema: fixed(CORS_HEADERS['access-control-expose-headers']!),
    },
  },
  parameters: {
    RequestId: {
      name: 'X-Request-Id',
      in: 'header',
      required: false,
      description: 'Your id for this request (1..128 of [A-Za-z0-9._:-]); echoed in the response and the logs',
      schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
    },
    KeywardNonce: {
      name: 'Keyward-Nonce',
      in: 'header',
      required: false,
      description:
        'Ask for a signed answer (Keyward-Signature): a fresh random value per request, 16..128 of [A-Za-z0-9_-]; anything else ' +
        '(empty included) is 400. Check that the signature covers your nonce, the path you called and the body you sent.',
      schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{16,128}$' },
    },
    IdempotencyKey: {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Retry safely: the same key with the same body within 24 h replays the first answer (Idempotent-Replayed: true) and creates nothing; ' +
        'with a different body it is 409 idempotency_key_reused',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    },
  },
  responses: Object.fromEntries(
    Object.values(PROBLEMS).map(({ name, description, headers }) => [
      name,
      {
        description,
        headers: { ...REQUEST_ID_HEADER, ...headers },
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    ]),
  ),
}

/** What a route declared in `detail` (http/responses.ts), read off its operation. */
interface Marks {
  idempotent: boolean
  client: boolean
  signed: boolean
}

/** Each operation, with its path and method. */
function* operations(doc: Json): Generator<[string, string, Json]> {
  for (const [path, ops] of Object.entries<Json>(doc.paths ?? {})) for (const [method, op] of Object.entries<Json>(ops)) yield [path, method, op]
}

/** The marks the plugin copied from each route's `detail` into its operation: read, then removed from the document. */
export function takeMarks(doc: Json): WeakMap<Json, Marks> {
  const marks = new WeakMap<Json, Marks>()
  for (const [, , op] of operations(doc)) {
    const client = clientRouteOf(op)
    marks.set(op, { idempotent: op[IDEMPOTENT_MARK] === true, client: client !== null, signed: client?.signed ?? false })
    delete op[IDEMPOTENT_MARK]
    delete op[CLIENT_MARK]
    delete op[SIGNED_MARK]
  }
  return marks
}

/** A module mounting `'/'` under a prefix gets `/v1/things/` in the document; the contract says `/v1/things`. */
export function contractPaths(doc: Json): void {
  for (const path of Object.keys(doc.paths ?? {})) {
    if (docPath(path) !== path) {
      doc.paths[docPath(path)] = { ...doc.paths[path], ...doc.paths[docPath(path)] }
      delete doc.paths[path]
    }
  }
}

/** Our own JSON parser (kernel onParse) makes the plugin drop every request body schema (`content: {}`): put them back, as JSON. */
export function requestBodies(doc: Json, routes: readonly RouteLike[]): void {
  const bodies = new Map<string, unknown>()
  for (const r of routes) if (r.hooks?.body) bodies.set(`${r.method.toLowerCase()} ${docPath(r.path)}`, r.hooks.body)
  for (const [path, method, op] of operations(doc)) {
    if (!op.requestBody) continue
    const schema = bodies.get(`${method} ${path}`)
    if (!schema) {
      delete op.requestBody
      continue
    }
    // A body that is JSON or text (the key import: an object, or CSV / NDJSON read by the kernel's readText)
    const either = (json(schema) as Json).anyOf as Json[] | undefined
    const object = either?.find((x) => x.type === 'object')
    const text = either?.find((x) => x.type === 'string')
    if (object && text) {
      op.requestBody.content = { 'application/json': { schema: object }, 'application/x-ndjson': { schema: text }, 'text/csv': { schema: text } }
      op.requestBody.required = true
      continue
    }
    op.requestBody.content = { 'application/json': { schema: json(schema) } } // JSON is the only body format the kernel parses (but the text above)
    op.requestBody.required = ((schema as Json).required ?? []).length > 0 // an empty body reads as {}
  }
}

/** A route whose body arrives raw (http/responses.ts `rawBody`): its JSON body schema and its required headers. */
export function rawBodies(doc: Json): void {
  for (const [, , op] of operations(doc)) {
    const mark = op[RAW_BODY_MARK] as { schema: unknown; headers: { name: string; description: string }[] } | undefined
    if (mark === undefined) continue
    delete op[RAW_BODY_MARK]
    op.requestBody = { required: true, content: { 'application/json': { schema: json(mark.schema) } } }
    op.parameters = [
      ...(op.parameters ?? []),
      ...mark.headers.map((h) => ({ name: h.name, in: 'header', required: true, description: h.description, schema: { type: 'string' } })),
    ]
  }
}

/** The body limit holds on every route, before routing (the kernel's 413 on a declared length): documented on every operation. */
export function bodyLimit(doc: Json): void {
  for (const [, , op] of operations(doc)) {
    op.responses ??= {}
    op.responses['413'] ??= { description: Problem.description, content: { 'application/json': { schema: Problem } } }
  }
}

const isProblem = (res: Json) =>
  res.content?.['application/json']?.schema?.description === Problem.description ||
  res.content?.['application/problem+json']?.schema?.description === Problem.description

/** A 204 declared as t.Void() becomes `content: {type: "void"}`, which is not valid OpenAPI: no content. */
export function voidResponses(doc: Json): void {
  for (const [, , op] of operations(doc)) {
    for (const [status, res] of Object.entries<Json>(op.responses ?? {})) {
      if (!isProblem(res) && res.content && typeof res.content.type === 'string') {
        delete res.content
        if (status === '204') res.description = 'No content'
      }
    }
  }
}

/** An answer declared as text with TEXT_TYPES_MARK is documented under those media types, not as JSON. */
export function textResponses(doc: Json): void {
  for (const [, , op] of operations(doc)) {
    for (const res of Object.values<Json>(op.responses ?? {})) {
      const schema = res.content?.['application/json']?.schema
      const types = schema?.[TEXT_TYPES_MARK] as string[] | undefined
      if (!types) continue
      const { [TEXT_TYPES_MARK]: _, ...plain } = schema
      res.content = Object.fromEntries(types.map((t) => [t, { schema: plain }]))
    }
  }
}

/** The request headers: Idempotency-Key on the create routes, Keyward-Nonce on the signed ones, X-Request-Id everywhere. */
export function requestHeaders(doc: Json, marks: WeakMap<Json, Marks>): void {
  for (const [, , op] of operations(doc)) {
    const m = marks.get(op)!
    op.parameters = [
      ...(op.parameters ?? []),
      ...(m.idempotent ? [{ $ref: '#/components/parameters/IdempotencyKey' }] : []),
      ...(m.signed ? [{ $ref: '#/components/parameters/KeywardNonce' }] : []),
      { $ref: '#/components/parameters/RequestId' },
    ]
  }
}

/**
 * Problem responses (http/responses.ts) become references to one documented response per status,
 * served as application/problem+json; answer headers on every response: X-Request-Id, Idempotent-Replayed
 * on a create route's successes, Keyward-Signature on a signed route's answers (401 excepted), the CORS
 * headers on every answer of a client route. A problem that carries more than the shared response's
 * headers is the shared response plus those.
 */
export function answers(doc: Json, marks: WeakMap<Json, Marks>): void {
  for (const [, , op] of operations(doc)) {
    const m = marks.get(op)!
    for (const [status, res] of Object.entries<Json>(op.responses ?? {})) {
      const extra: Json = {
        ...(m.idempotent && status.startsWith('2') ? { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } } : {}),
        ...(m.signed && status !== '401' ? SIGNATURE_HEADER : {}),
        ...(m.client ? CORS_ANSWER_HEADERS : {}),
      }
      const problem = Number(status) >= 400 && isProblem(res) ? PROBLEMS[status] : undefined
      if (problem) {
        const shared = COMPONENTS.responses[problem.name]
        op.responses[status] = Object.keys(extra).length === 0 ? { $ref: `#/components/responses/${problem.name}` } : { ...shared, headers: { ...shared.headers, ...extra } }
      } else {
        res.headers = { ...REQUEST_ID_HEADER, ...extra }
      }
    }
  }
}

/** The CORS preflight (OPTIONS) of every client route: answered before authentication, 204 with the CORS headers. */
export function corsPreflights(doc: Json, marks: WeakMap<Json, Marks>): void {
  for (const [path, ops] of Object.entries<Json>(doc.paths ?? {})) {
    const client = Object.entries<Json>(ops).filter(([, op]) => marks.get(op)?.client)
    if (client.length === 0 || ops.options) continue
    const methods = client.map(([method]) => method.toUpperCase()).join(', ')
    const allowed = preflightHeaders(methods)
    const header = (description: string, value: string) => ({ description, schema: fixed(value) })
    ops.options = {
      summary: `CORS preflight for ${methods} ${path}`,
      description: 'What a browser sends before a cross-origin call: answered before authentication (no credentials needed), on any origin.',
      tags: client[0]![1].tags,
      security: [],
      parameters: [
        { name: 'Origin', in: 'header', required: false, schema: { type: 'string' } },
        { name: 'Access-Control-Request-Method', in: 'header', required: false, schema: { type: 'string' } },
        { name: 'Access-Control-Request-Headers', in: 'header', required: false, schema: { type: 'string' } },
        { $ref: '#/components/parameters/RequestId' },
      ],
      responses: {
        '204': {
          description: 'The preflight is accepted: the methods and request headers a page may use',
          headers: {
            ...REQUEST_ID_HEADER,
            ...CORS_ANSWER_HEADERS,
            'Access-Control-Allow-Methods': header('The route\'s methods', allowed['access-control-allow-methods']!),
            'Access-Control-Allow-Headers': header('The request headers a page may send', allowed['access-control-allow-headers']!),
            'Access-Control-Max-Age': header('Seconds a browser may keep this answer', allowed['access-control-max-age']!),
          },
        },
      },
    }
  }
}

const WEBHOOK_HEADERS = [
  ['webhook-id', 'The event id; identical on every retry, so receivers can deduplicate'],
  ['webhook-timestamp', 'Unix seconds when this attempt was signed'],
  ['webhook-signature', 'v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}" with the secret after whsec_>'],
].map(([name, description]) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } }))

/** The webhook event payloads (OpenAPI 3.1 `webhooks`): the POST a receiver gets for each event type. */
export function webhooks(doc: Json, events: Record<string, TSchema>): void {
  doc.webhooks = Object.fromEntries(
    Object.entries(events).map(([type, body]) => [
      type,
      {
        post: {
          summary: `${type} event`,
          description: 'Sent to each active webhook subscribed to this type (Standard Webhooks). A 2xx answer is success; other answers are retried; 410 disables the webhook.',
          tags: ['Webhook events'],
          parameters: WEBHOOK_HEADERS,
          requestBody: { required: true, content: { 'application/json': { schema: json(body) } } },
          responses: { '2XX': { description: 'Received' }, '410': { description: 'Gone: the webhook is disabled' } },
        },
      },
    ]),
  )
}

/** The shared components (headers, parameters, problem responses, the Problem schema) and a `servers` entry. */
export function components(doc: Json): void {
  doc.servers = [{ url: '/', description: 'The node serving this document (every node of a cluster serves the same API)' }]
  doc.components = {
    ...doc.components,
    ...COMPONENTS,
    schemas: { ...doc.components?.schemas, Problem: json(Problem) },
  }
}

/** The generated document, completed (in place; pass a copy). */
export function fixDocument(doc: Json, routes: readonly RouteLike[], events: Record<string, TSchema> = {}): Json {
  contractPaths(doc)
  const marks = takeMarks(doc)
  requestBodies(doc, routes)
  rawBodies(doc)
  bodyLimit(doc)
  voidResponses(doc)
  textResponses(doc)
  requestHeaders(doc, marks)
  answers(doc, marks)
  corsPreflights(doc, marks)
  webhooks(doc, events)
  components(doc)
  return doc
}

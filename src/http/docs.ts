// `/docs` (interactive) and `/docs/json` (OpenAPI 3.1).
//
// The page is Scalar's API reference, served by the node itself from the pinned npm package (no CDN),
// so it renders on a site without internet access.
//
// @elysiajs/openapi renders a few things wrong or leaves them out for this app, so the generated
// document is completed before it is served:
// - a 204 declared as t.Void() becomes `content: {type: "void"}`, which is not valid OpenAPI;
// - our own JSON parser (kernel onParse) makes it drop every request body schema (`content: {}`);
// - problem responses (http/responses.ts) become references to one documented response per status,
//   served as application/problem+json with their headers;
// - headers: X-Request-Id (request and response) on every operation, Idempotency-Key and
//   Idempotent-Replayed on the create routes marked IDEMPOTENT, Retry-After on 429, Keyward-Nonce and
//   Keyward-Signature (on every answer, problems included) on the routes marked SIGNED;
// - the webhook event payloads (OpenAPI 3.1 `webhooks`) and a `servers` entry.
import { openapi } from '@elysiajs/openapi'
import type { TSchema } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { IDEMPOTENT, SIGNED } from './responses'
import { Problem } from './schema'

type Json = Record<string, any>
type RouteLike = { method: string; path: string; hooks?: { body?: unknown } }

const TITLE = 'Keyward API'
const DESCRIPTION = 'License keys for software vendors: products, keys, validation, webhooks, analytics, offline licenses.'

/** `/v1/keys/:id/` → `/v1/keys/{id}`: the contract's path form (routing accepts both slash forms). */
const docPath = (path: string) => path.replace(/:([^/]+)/g, '{$1}').replace(/(.)\/$/, '$1')

const json = (schema: unknown) => JSON.parse(JSON.stringify(schema))

const PROBLEMS: Record<string, { name: string; description: string; headers?: Json }> = {
  '400': {
    name: 'BadRequest',
    description: 'invalid_request: malformed JSON, a body or query that fails its schema, a NUL in the query, a malformed Keyward-Nonce',
  },
  '401': { name: 'Unauthorized', description: 'unauthorized: missing, malformed, unknown or revoked credential' },
  '402': { name: 'PaymentRequired', description: "plan_limit_reached or plan_upgrade_required: the account's plan does not allow it" },
  '403': { name: 'Forbidden', description: "insufficient_scope: the API key's scope does not allow this route" },
  '404': { name: 'NotFound', description: 'not_found: unknown route, or an id not found in this account' },
  '409': { name: 'Conflict', description: 'A conflict with the current state (the code names it), or idempotency_key_reused' },
  '413': { name: 'PayloadTooLarge', description: 'payload_too_large: the request body is over 64 KiB' },
  '422': { name: 'UnprocessableContent', description: 'product_has_active_keys' },
  '429': {
    name: 'TooManyRequests',
    description: "rate_limited: the account's daily validate limit is reached; retry_after and Retry-After say when it resets",
    headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
  },
  '503': { name: 'ServiceUnavailable', description: 'unavailable: a dependency this call needs (Postgres) is unreachable; retry shortly' },
}

const COMPONENTS: Json = {
  headers: {
    RequestId: {
      description: "The request's id: the caller's X-Request-Id when it sent a sane one (1..128 of [A-Za-z0-9._:-]), else generated",
      schema: { type: 'string' },
    },
    RetryAfter: { description: 'Seconds until the limit resets (the next UTC midnight)', schema: { type: 'integer' } },
    KeywardSignature: {
      description:
        'Sent when the request carried a well-formed Keyward-Nonce (every answer after authentication: not a 401, not the 400 for a ' +
        'malformed nonce). `alg=ed25519, kid=<kid>, t=<unix ms>, sig=<standard base64>`: an Ed25519 signature over the UTF-8 of ' +
        '"keyward-answer/v1\\n" + path (e.g. /v1/validate) + "\\n" + nonce + "\\n" + t + "\\n" + the exact response body bytes, with the ' +
        "account's offline signing key (GET /v1/offline/public-key, same kid).",
      schema: { type: 'string', pattern: '^alg=ed25519, kid=[0-9a-f]+, t=[0-9]+, sig=[A-Za-z0-9+/]+={0,2}$' },
    },
    IdempotentReplayed: {
      description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key and body',
      schema: { type: 'string', enum: ['true'] },
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
        '(empty included) is 400. Check that the signature covers your nonce and the path you called.',
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
        headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' }, ...headers },
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    ]),
  ),
}

const WEBHOOK_HEADERS = [
  ['webhook-id', 'The event id; identical on every retry, so receivers can deduplicate'],
  ['webhook-timestamp', 'Unix seconds when this attempt was signed'],
  ['webhook-signature', 'v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}" with the secret after whsec_>'],
].map(([name, description]) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } }))

/** OpenAPI 3.1 `webhooks`: the POST a receiver gets for each event type. */
function webhooksOf(events: Record<string, TSchema>): Json {
  return Object.fromEntries(
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

const isProblem = (res: Json) =>
  res.content?.['application/json']?.schema?.description === Problem.description ||
  res.content?.['application/problem+json']?.schema?.description === Problem.description

export function fixDocument(doc: Json, routes: readonly RouteLike[], events: Record<string, TSchema> = {}): Json {
  const bodies = new Map<string, unknown>()
  for (const r of routes) if (r.hooks?.body) bodies.set(`${r.method.toLowerCase()} ${docPath(r.path)}`, r.hooks.body)
  // A module mounting `'/'` under a prefix gets `/v1/things/` in the document; the contract says `/v1/things`.
  for (const path of Object.keys(doc.paths ?? {})) {
    if (docPath(path) !== path) {
      doc.paths[docPath(path)] = { ...doc.paths[path], ...doc.paths[docPath(path)] }
      delete doc.paths[path]
    }
  }
  const idempotentMark = Object.keys(IDEMPOTENT)[0]!
  const signedMark = Object.keys(SIGNED)[0]!
  const signature = { 'Keyward-Signature': { $ref: '#/components/headers/KeywardSignature' } }
  for (const [path, ops] of Object.entries<Json>(doc.paths ?? {})) {
    for (const [method, op] of Object.entries<Json>(ops)) {
      const signed = op[signedMark] === true
      delete op[signedMark]
      if (op.requestBody) {
        const schema = bodies.get(`${method} ${path}`)
        // JSON is the only body format the kernel parses.
        op.requestBody.content = schema ? { 'application/json': { schema: json(schema) } } : op.requestBody.content
        if (!schema) delete op.requestBody
        else op.requestBody.required = ((schema as Json).required ?? []).length > 0 // an empty body reads as {}
      }
      const idempotent = op[idempotentMark] === true
      delete op[idempotentMark]
      op.parameters = [
        ...(op.parameters ?? []),
        ...(idempotent ? [{ $ref: '#/components/parameters/IdempotencyKey' }] : []),
        ...(signed ? [{ $ref: '#/components/parameters/KeywardNonce' }] : []),
        { $ref: '#/components/parameters/RequestId' },
      ]
      for (const [status, res] of Object.entries<Json>(op.responses ?? {})) {
        if (Number(status) >= 400 && isProblem(res) && PROBLEMS[status]) {
          const shared = COMPONENTS.responses[PROBLEMS[status].name]
          // A signed route's problems carry the signature too (401 excepted): the shared response plus that header.
          op.responses[status] =
            signed && status !== '401'
              ? { ...shared, headers: { ...shared.headers, ...signature } }
              : { $ref: `#/components/responses/${PROBLEMS[status].name}` }
          continue
        }
        if (res.content && typeof res.content.type === 'string') {
          delete res.content
          if (status === '204') res.description = 'No content'
        }
        res.headers = {
          'X-Request-Id': { $ref: '#/components/headers/RequestId' },
          ...(idempotent && status.startsWith('2') ? { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } } : {}),
          ...(signed ? signature : {}),
        }
      }
    }
  }
  doc.servers = [{ url: '/', description: 'The node serving this document (every node of a cluster serves the same API)' }]
  doc.components = {
    ...doc.components,
    ...COMPONENTS,
    schemas: { ...doc.components?.schemas, Problem: json(Problem) },
  }
  doc.webhooks = webhooksOf(events)
  return doc
}

// The Scalar bundle, from the package pinned in package.json: one self-contained script.
const SCALAR_DIR = join(dirname(Bun.resolveSync('@scalar/api-reference', import.meta.dir)), 'browser')
const SCALAR_VERSION: string = JSON.parse(readFileSync(join(SCALAR_DIR, '..', '..', 'package.json'), 'utf8')).version

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/**
 * The page. URLs are relative, so it works under any prefix a proxy adds; `/docs/` sits one level
 * deeper than `/docs`, so its links drop the `docs/` step.
 */
export function docsPage(trailingSlash: boolean): string {
  const base = trailingSlash ? '' : 'docs/'
  const config = {
    url: `${base}json`,
    // Nothing from other origins: no web fonts, no telemetry, no hosted proxy for "try it".
    withDefaultFonts: false,
    telemetry: false,
    proxyUrl: '',
    hideClientButton: false,
    defaultOpenAllTags: false,
  }
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${escapeHtml(TITLE)}</title>
    <meta name="description" content="${escapeHtml(DESCRIPTION)}" />
    <style>body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }</style>
  </head>
  <body>
    <noscript>The interactive reference needs JavaScript; the OpenAPI document is at <a href="${base}json">${base}json</a>.</noscript>
    <script id="api-reference" data-configuration="${escapeHtml(JSON.stringify(config))}"></script>
    <script src="${base}assets/api-reference.js?v=${SCALAR_VERSION}"></script>
  </body>
</html>
`
}

export function docs(options: { events?: Record<string, TSchema> } = {}) {
  const self: Elysia = new Elysia({ name: 'keyward.docs' })
  const script = Bun.file(join(SCALAR_DIR, 'standalone.js'))
  return self
    .onAfterHandle(({ path, response }) => {
      // getGlobalRoutes is what the openapi plugin itself reads; it is protected only in the typings.
      const routes = (self as unknown as { getGlobalRoutes(): RouteLike[] }).getGlobalRoutes()
      // The plugin caches its document: complete a copy, so every request gets the same answer.
      if (path === '/docs/json' && response && typeof response === 'object') {
        return fixDocument(structuredClone(response) as Json, routes, options.events)
      }
    })
    .use(
      openapi({
        path: '/docs',
        specPath: '/docs/json',
        provider: null, // the page below serves the pinned bundle instead of a CDN's
        documentation: {
          info: { title: TITLE, version: '1.0.0', description: DESCRIPTION },
          components: {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', description: 'API key: kw_ followed by 32 alphanumerics' },
              admin: { type: 'http', scheme: 'bearer', description: 'Operator token (ADMIN_TOKEN)' },
            },
          },
        },
      }),
    )
    .get('/docs', ({ request }) => new Response(docsPage(new URL(request.url).pathname.endsWith('/')), {
      headers: { 'content-type': 'text/html; charset=utf-8' },
    }), { detail: { hide: true } })
    .get('/docs/assets/api-reference.js', () => new Response(script, {
      // The version is in the URL, so a browser may keep it for as long as it likes.
      headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=31536000, immutable' },
    }), { detail: { hide: true } })
}

// `/docs` (interactive) and `/docs/json` (OpenAPI 3.1). @elysiajs/openapi renders a few things wrong
// for this app, so the generated document is corrected before it is served:
// - a 204 declared as t.Void() becomes `content: {type: "void"}`, which is not valid OpenAPI;
// - our own JSON parser (kernel onParse) makes it drop every request body schema (`content: {}`);
// - problem documents are filed under application/json instead of application/problem+json.
import { openapi } from '@elysiajs/openapi'
import { Elysia } from 'elysia'

type Json = Record<string, any>
type RouteLike = { method: string; path: string; hooks?: { body?: unknown } }

/** `/v1/keys/:id/` → `/v1/keys/{id}`: the contract's path form (routing accepts both slash forms). */
const docPath = (path: string) => path.replace(/:([^/]+)/g, '{$1}').replace(/(.)\/$/, '$1')

export function fixDocument(doc: Json, routes: readonly RouteLike[]): Json {
  const bodies = new Map<string, unknown>()
  for (const r of routes) if (r.hooks?.body) bodies.set(`${r.method.toLowerCase()} ${docPath(r.path)}`, r.hooks.body)
  // A module mounting `'/'` under a prefix gets `/v1/things/` in the document; the contract says `/v1/things`.
  for (const path of Object.keys(doc.paths ?? {})) {
    if (docPath(path) !== path) {
      doc.paths[docPath(path)] = { ...doc.paths[path], ...doc.paths[docPath(path)] }
      delete doc.paths[path]
    }
  }
  for (const [path, ops] of Object.entries<Json>(doc.paths ?? {})) {
    for (const [method, op] of Object.entries<Json>(ops)) {
      if (op.requestBody) {
        const schema = bodies.get(`${method} ${path}`)
        // JSON is the only body format the kernel parses.
        op.requestBody.content = schema ? { 'application/json': { schema: JSON.parse(JSON.stringify(schema)) } } : op.requestBody.content
        if (!schema) delete op.requestBody
        else op.requestBody.required = ((schema as Json).required ?? []).length > 0 // an empty body reads as {}
      }
      for (const [status, res] of Object.entries<Json>(op.responses ?? {})) {
        if (res.content && typeof res.content.type === 'string') {
          delete res.content
          if (status === '204') res.description = 'No content'
        } else if (Number(status) >= 400 && res.content?.['application/json']) {
          res.content = { 'application/problem+json': res.content['application/json'] }
        }
      }
    }
  }
  return doc
}

export function docs() {
  const self: Elysia = new Elysia({ name: 'keyward.docs' })
  return self
    .onAfterHandle(({ path, response }) => {
      // getGlobalRoutes is what the openapi plugin itself reads; it is protected only in the typings.
      const routes = (self as unknown as { getGlobalRoutes(): RouteLike[] }).getGlobalRoutes()
      if (path === '/docs/json' && response && typeof response === 'object') fixDocument(response as Json, routes)
    })
    .use(
      openapi({
        path: '/docs',
        specPath: '/docs/json',
        documentation: {
          info: {
            title: 'Keyward API',
            version: '1.0.0',
            description: 'License keys for software vendors: products, keys, validation, webhooks, analytics, offline licenses.',
          },
          components: {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', description: 'API key: kw_ followed by 32 alphanumerics' },
              admin: { type: 'http', scheme: 'bearer', description: 'Operator token (ADMIN_TOKEN)' },
            },
          },
        },
      }),
    )
}

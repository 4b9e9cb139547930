// `/docs` (interactive) and `/docs/json` (OpenAPI 3.1): the page and the plugin that serves the
// document; the document's fixes are in http/openapi-fixes.ts.
//
// The page is Scalar's API reference, served by the node itself from the pinned npm package (no CDN),
// so it renders on a site without internet access. Like the console, every answer under /docs carries
// a same-origin Content-Security-Policy (no framing by other sites) and `nosniff`.
import { openapi } from '@elysiajs/openapi'
import type { TSchema } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fixDocument, type RouteLike } from './openapi-fixes'
import { requestPath } from './request-path'

export { fixDocument } from './openapi-fixes'

type Json = Record<string, any>

const TITLE = 'Keyward API'
const DESCRIPTION = 'License keys for software vendors: products, keys, validation, webhooks, analytics, offline licenses.'

// The Scalar bundle, from the package pinned in package.json: one self-contained script.
const SCALAR_DIR = join(dirname(Bun.resolveSync('@scalar/api-reference', import.meta.dir)), 'browser')
const SCALAR_VERSION: string = JSON.parse(readFileSync(join(SCALAR_DIR, '..', '..', 'package.json'), 'utf8')).version

/**
 * The console's policy (console/serve.ts: same origin only, no framing, no plugins), but for styles:
 * Scalar's bundle injects its styles at run time, which `style-src 'self'` would block (the page
 * renders unstyled). Scripts stay `'self'`: the page's one inline script element is data (its
 * configuration), never run. Written out here (http/ does not import the console, a layer above);
 * test/http/openapi.test.ts holds the two policies together.
 */
export const DOCS_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; " +
  "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/** Headers of every answer under /docs (a header, not http-equiv, which cannot carry frame-ancestors). */
export const DOCS_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': DOCS_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
})

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
    .onAfterHandle(({ path, response, set }) => {
      // getGlobalRoutes is what the openapi plugin itself reads; it is protected only in the typings.
      const routes = (self as unknown as { getGlobalRoutes(): RouteLike[] }).getGlobalRoutes()
      // The plugin caches its document: complete a copy, so every request gets the same answer.
      if (path === '/docs/json' && response && typeof response === 'object') {
        Object.assign(set.headers, DOCS_HEADERS)
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
    .get('/docs', ({ request }) => new Response(docsPage(requestPath(request.url).endsWith('/')), {
      headers: { 'content-type': 'text/html; charset=utf-8', ...DOCS_HEADERS },
    }), { detail: { hide: true } })
    .get('/docs/assets/api-reference.js', () => new Response(script, {
      // The version is in the URL, so a browser may keep it for as long as it likes.
      headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=31536000, immutable', ...DOCS_HEADERS },
    }), { detail: { hide: true } })
}

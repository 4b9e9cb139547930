// `/portal/:product_id/offline`: the end-user page for air-gapped activation (docs/api.md, "The
// end-user page"), bundled by Bun from src/portal/app the first time someone opens it, as the console
// is (src/console/serve.ts). Served by every node, no sign-in. Its CSP allows this origin only: the
// page loads, and talks to, nothing else (the QR encoder is bundled in). A product whose page is off,
// or unknown, answers 404 like any unknown path.
import { Elysia } from 'elysia'
import type { Sql } from '../infra/db'
import type { PortalGate } from '../modules/air-gapped/portal'
import { portalProduct } from '../modules/air-gapped/portal'

/** This origin only; no inline script or style, no framing, no form posts anywhere (the page posts with fetch). */
export const PORTAL_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; media-src 'self' blob:; " +
  "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

interface Asset {
  body: ArrayBuffer
  type: string
}

interface Bundle {
  index: string
  assets: Map<string, Asset>
}

const ENTRY = new URL('./app/index.html', import.meta.url).pathname
const SLOT = 'data-product></p>'

async function build(): Promise<Bundle> {
  const out = await Bun.build({
    entrypoints: [ENTRY],
    minify: true,
    target: 'browser',
    publicPath: '/portal/assets/',
    naming: { entry: '[name].[ext]', chunk: '[name]-[hash].[ext]', asset: '[name]-[hash].[ext]' },
    define: { 'process.env.NODE_ENV': '"production"' },
  })
  if (!out.success) throw new Error(`portal build failed: ${out.logs.map(String).join('\n')}`)
  let index: string | null = null
  const assets = new Map<string, Asset>()
  for (const file of out.outputs) {
    const name = file.path.replace(/^.*\//, '')
    if (file.kind === 'entry-point' && name.endsWith('.html')) index = await file.text()
    else assets.set(name, { body: await file.arrayBuffer(), type: file.type })
  }
  if (!index || !index.includes(SLOT)) throw new Error('portal build produced no page with its product slot')
  return { index, assets }
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const HEADERS = {
  'content-security-policy': PORTAL_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'permissions-policy': 'camera=(self), microphone=(), geolocation=()',
}

const notFound = () =>
  new Response('Not found', { status: 404, headers: { ...HEADERS, 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' } })

export function portalPage(sql: Sql, gate: PortalGate) {
  let bundle: Promise<Bundle> | null = null
  // One build per process; a failed build is retried on the next request instead of being cached.
  const load = () =>
    (bundle ??= build().catch((err) => {
      bundle = null
      throw err
    }))
  return new Elysia({ name: 'keyward.portal-page' })
    .get(
      '/portal/:product_id/offline',
      async ({ params, request, server }) => {
        gate.admitAddress(server?.requestIP(request)?.address ?? null)
        const product = await portalProduct(sql, params.product_id)
        if (!product) return notFound()
        const html = (await load()).index.replace(SLOT, `data-product>${escapeHtml(product.name)}</p>`)
        return new Response(html, { headers: { ...HEADERS, 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' } })
      },
      { detail: { hide: true } },
    )
    .get(
      '/portal/assets/:name',
      async ({ params }) => {
        const asset = (await load()).assets.get(params.name)
        if (!asset) return notFound()
        return new Response(asset.body, {
          headers: { ...HEADERS, 'content-type': asset.type, 'cache-control': 'public, max-age=31536000, immutable' },
        })
      },
      { detail: { hide: true } },
    )
}

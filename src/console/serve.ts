// `/console`: the web console, bundled by Bun from src/console/app the first time someone opens it
// (nothing for the user to build; nodes that never serve it never pay for the build). Every answer
// carries a same-origin Content-Security-Policy: the console loads nothing from another origin.
import { Elysia } from 'elysia'

/** Everything from this origin only; no inline script or style, no framing, forms post only here. */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
  "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

interface Asset {
  body: ArrayBuffer
  type: string
}

export interface ConsoleBundle {
  index: Asset
  assets: Map<string, Asset>
}

const ENTRY = new URL('./app/index.html', import.meta.url).pathname

/** Bundles the console (HTML, JS, CSS) in memory; assets are named by content hash under /console/assets/. */
export async function buildConsole(): Promise<ConsoleBundle> {
  const out = await Bun.build({
    entrypoints: [ENTRY],
    minify: true,
    target: 'browser',
    publicPath: '/console/assets/',
    naming: { entry: '[name].[ext]', chunk: '[name]-[hash].[ext]', asset: '[name]-[hash].[ext]' },
    define: { 'process.env.NODE_ENV': '"production"' },
  })
  if (!out.success) throw new Error(`console build failed: ${out.logs.map(String).join('\n')}`)
  let index: Asset | null = null
  const assets = new Map<string, Asset>()
  for (const file of out.outputs) {
    const name = file.path.replace(/^.*\//, '')
    const asset = { body: await file.arrayBuffer(), type: file.type }
    if (file.kind === 'entry-point' && name.endsWith('.html')) index = asset
    else assets.set(name, asset)
  }
  if (!index) throw new Error('console build produced no index.html')
  return { index, assets }
}

function answer(asset: Asset, cache: string) {
  return new Response(asset.body, {
    headers: {
      'content-type': asset.type,
      'content-security-policy': CONSOLE_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': cache,
    },
  })
}

export function consoleRoutes() {
  let bundle: Promise<ConsoleBundle> | null = null
  // One build per process; a failed build is retried on the next request instead of being cached.
  const load = () =>
    (bundle ??= buildConsole().catch((err) => {
      bundle = null
      throw err
    }))
  const page = async () => answer((await load()).index, 'no-cache')
  return new Elysia({ name: 'keyward.console' })
    .get('/console', page, { detail: { hide: true } })
    .get('/console/', page, { detail: { hide: true } })
    .get(
      '/console/assets/:name',
      async ({ params, set }) => {
        const asset = (await load()).assets.get(params.name)
        if (!asset) {
          set.status = 404
          set.headers['content-security-policy'] = CONSOLE_CSP
          return 'Not found'
        }
        // Names carry a content hash, so a browser may keep them.
        return answer(asset, 'public, max-age=31536000, immutable')
      },
      { detail: { hide: true } },
    )
}

// The built package (dist/) in headless Chromium: a page on one origin imports it and validates
// against the fake signing server on another origin (CORS), so signature verification runs on the
// browser's own WebCrypto Ed25519. Also: a forged answer is refused there, the fingerprint falls back
// to a random id kept in localStorage, and grace works from localStorage.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join, normalize } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { startFakeServer, type FakeServer } from './support/fake-server'

const CHROMIUM = '/usr/bin/chromium'
const present = existsSync(CHROMIUM)
if (!present) console.warn(`client browser test: skipped, ${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`)

setDefaultTimeout(120_000)
const ROOT = join(import.meta.dir, '..')
const DIST = join(ROOT, 'dist')

let fake: FakeServer
let site: ReturnType<typeof Bun.serve>
let browser: Browser
beforeAll(async () => {
  if (!present) return
  // Build the package exactly as it is published.
  const tsc = join(ROOT, '..', 'node_modules', '.bin', 'tsc')
  const built = Bun.spawnSync([tsc, '-p', join(ROOT, 'tsconfig.json')], { stdout: 'pipe', stderr: 'pipe' })
  if (built.exitCode !== 0) throw new Error(`client build failed: ${built.stdout.toString()}${built.stderr.toString()}`)
  fake = startFakeServer()
  site = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(req) {
      const path = new URL(req.url).pathname
      if (path === '/') return new Response('<!doctype html><title>licensed web app</title><p>app</p>', { headers: { 'content-type': 'text/html' } })
      const file = normalize(join(DIST, path.replace(/^\/dist\//, '')))
      if (!path.startsWith('/dist/') || !file.startsWith(DIST) || !existsSync(file)) return new Response('not found', { status: 404 })
      return new Response(readFileSync(file), { headers: { 'content-type': 'text/javascript' } })
    },
  })
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
}, 120_000)
afterAll(async () => {
  await browser?.close()
  site?.stop(true)
  await fake?.stop()
})

test.skipIf(!present)('in Chromium: validate across origins is verified, forgeries refused, grace and fingerprint from localStorage', async () => {
  const page = await browser.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`http://127.0.0.1:${site.port}/`)
  expect(new URL(fake.url).origin).not.toBe(`http://127.0.0.1:${site.port}`)
  const out = await page.evaluate(
    async ({ api, publicKey }) => {
      const { Keyward, SignatureError } = await import('/dist/index.js' as string)
      const make = () => new Keyward({ baseUrl: api, token: 'kw_test', publicKey, productId: 'prod_web', backoffMs: 1, retries: 0 })
      const kw = make()
      const fingerprint = await kw.fingerprint()
      const again = await make().fingerprint()
      const first = await kw.validate({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', deviceName: 'browser' })
      return {
        fingerprint,
        again,
        deviceId: localStorage.getItem('keyward:device-id'),
        stored: localStorage.getItem('keyward:answer') !== null,
        first: { valid: first.valid, plan: first.plan, offline: first.offline },
        userAgent: navigator.userAgent,
        hasSignatureError: typeof SignatureError === 'function',
      }
    },
    { api: fake.url, publicKey: fake.publicKeyRaw },
  )
  expect(errors).toEqual([])
  expect(out.userAgent).toContain('Chrome')
  expect(out.first).toEqual({ valid: true, plan: 'pro', offline: false })
  expect(out.fingerprint).toMatch(/^[0-9a-f]{64}$/)
  expect(out.again).toBe(out.fingerprint)
  expect(out.deviceId).toMatch(/^random:[0-9a-f]{64}$/)
  expect(out.stored).toBe(true)
  expect(fake.requests.find((r) => r.path === '/v1/validate')?.body.device_fingerprint).toBe(out.fingerprint)

  // A forged answer is an error in the browser too; then the service goes away: grace from localStorage.
  const run = (mode: string) =>
    page.evaluate(
      async ({ api, publicKey }) => {
        const { Keyward } = await import('/dist/index.js' as string)
        const kw = new Keyward({ baseUrl: api, token: 'kw_test', publicKey, productId: 'prod_web', backoffMs: 1, retries: 0 })
        try {
          const r = await kw.validate({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' })
          return { valid: r.valid, offline: r.offline }
        } catch (e: any) {
          return { error: e.code, name: e.name }
        }
      },
      { api: fake.url, publicKey: fake.publicKeyRaw },
    ).then((r) => ({ mode, ...r }))
  fake.mode = 'wrong_key'
  expect(await run('wrong_key')).toEqual({ mode: 'wrong_key', error: 'bad_signature', name: 'SignatureError' })
  fake.mode = 'down'
  expect(await run('down')).toEqual({ mode: 'down', valid: true, offline: true })
  fake.mode = 'ok'
  await page.close()
})

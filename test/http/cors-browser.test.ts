// CORS as a browser enforces it (docs/api.md, "CORS"): a page served from another origin (a second local server)
// calls POST /v1/validate with a Keyward-Nonce through fetch, which needs a preflight (Authorization,
// Keyward-Nonce), and reads Keyward-Signature from the answer; the signature verifies with node:crypto
// and the key the page itself fetched from GET /v1/offline/public-key. The same page calling an admin
// route is blocked by the browser (no CORS headers there). Headless Chromium (Debian's package).
import { expect, setDefaultTimeout, test } from 'bun:test'
import { createHash, createPublicKey, verify } from 'node:crypto'
import { useChromium } from '../support/chromium'
import { ADMIN_TOKEN, fingerprint, newKey, newProduct, startHarness, type Harness } from '../support/harness'

setDefaultTimeout(120_000)

let h: Harness
let page: ReturnType<typeof Bun.serve>
const chromium = await useChromium('http/cors-browser', {
  setUp: async () => {
    h = await startHarness()
    // The vendor's web app: another origin (another port), serving a page and nothing else.
    page = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: () => new Response('<!doctype html><title>app</title><p>app</p>', { headers: { 'content-type': 'text/html; charset=utf-8' } }),
    })
  },
  tearDown: async () => {
    page?.stop(true)
    await h?.close()
  },
})
const present = chromium.present

interface PageCall {
  ok: boolean
  status?: number
  body?: string
  signature?: string | null
  requestId?: string | null
  error?: string
}

test.skipIf(!present)('a page on another origin validates with a nonce, reads the signature, and cannot reach admin routes', async () => {
  const { token } = await h.account()
  const key = await newKey(h.call, token, (await newProduct(h.call, token)).id)
  const appOrigin = `http://127.0.0.1:${page.port}`
  const api = h.node.url
  expect(new URL(api).origin).not.toBe(appOrigin)

  const tab = await chromium.browser.newPage()
  await tab.goto(`${appOrigin}/`, { waitUntil: 'load' })
  const nonce = 'browser-nonce-0123456789_abcdef'
  const device = fingerprint()
  const results = await tab.evaluate(
    async ({ api, token, adminToken, nonce, body }) => {
      const call = async (url: string, init: RequestInit) => {
        try {
          const res = await fetch(url, init)
          return {
            ok: true,
            status: res.status,
            body: await res.text(),
            signature: res.headers.get('keyward-signature'),
            requestId: res.headers.get('x-request-id'),
          }
        } catch (err) {
          return { ok: false, error: String(err) }
        }
      }
      const auth = { authorization: `Bearer ${token}` }
      return {
        origin: (globalThis as unknown as { location: { origin: string } }).location.origin,
        validate: await call(`${api}/v1/validate`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json', 'keyward-nonce': nonce },
          body: JSON.stringify(body),
        }),
        publicKey: await call(`${api}/v1/offline/public-key`, { headers: auth }),
        products: await call(`${api}/v1/products`, { headers: auth }),
        adminAccounts: await call(`${api}/admin/accounts`, { headers: { authorization: `Bearer ${adminToken}` } }),
        // A simple request needs no preflight: the browser sends it but keeps the answer from the page.
        health: await call(`${api}/healthz`, {}),
      }
    },
    { api, token, adminToken: ADMIN_TOKEN, nonce, body: { key: key.key_value, device_fingerprint: device } },
  )
  await tab.close()

  expect(results.origin).toBe(appOrigin)
  const validate = results.validate as PageCall
  expect(validate).toMatchObject({ ok: true, status: 200 })
  expect(JSON.parse(validate.body!)).toMatchObject({ valid: true, activations_used: 1 })
  // Exposed headers are readable by the page.
  expect(validate.requestId).toMatch(/^req_/)
  const m = /^alg=ed25519, kid=([0-9a-f]+), t=(\d+), sig=([A-Za-z0-9+/]+=*)$/.exec(validate.signature ?? '')
  expect(m).not.toBeNull()

  const publicKey = results.publicKey as PageCall
  expect(publicKey).toMatchObject({ ok: true, status: 200 })
  const published = JSON.parse(publicKey.body!)
  expect(m![1]).toBe(published.kid)
  // The request body the page sent (JSON.stringify of the same object), whose SHA-256 the signature covers.
  const sent = JSON.stringify({ key: key.key_value, device_fingerprint: device })
  const requestSha256 = createHash('sha256').update(sent).digest('hex')
  const signed = Buffer.from(`keyward-answer/v3\n${published.kid}\n/v1/validate\n${nonce}\n${m![2]}\n${requestSha256}\n${validate.body}`, 'utf8')
  expect(verify(null, signed, createPublicKey(published.public_key_pem), Buffer.from(m![3], 'base64'))).toBe(true)

  // Blocked by the browser: fetch rejects, the page learns nothing.
  for (const name of ['products', 'adminAccounts', 'health'] as const) {
    const blocked = results[name] as PageCall
    expect([name, blocked.ok, blocked.error]).toEqual([name, false, 'TypeError: Failed to fetch'])
  }
  // The same calls from a server (no browser) work: it is CORS that stopped them.
  expect((await h.call('GET', '/v1/products', { token })).status).toBe(200)
  expect((await h.call('GET', '/admin/accounts', { token: ADMIN_TOKEN })).status).toBe(200)
})

// The console is served by the node itself: the page and its hashed assets, each with a same-origin
// Content-Security-Policy, and no entry in the API document (it is not an API route).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startHarness, type Harness } from '../support/harness'

let h: Harness
beforeAll(async () => {
  h = await startHarness()
}, 60_000)
afterAll(async () => {
  await h?.close()
}, 30_000)

test('GET /console answers the page with a same-origin CSP, and every asset it names is served', async () => {
  const res = await fetch(h.node.url + '/console')
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toContain('text/html')
  const csp = res.headers.get('content-security-policy') ?? ''
  expect(csp).toContain("default-src 'self'")
  expect(csp).toContain("script-src 'self'")
  expect(csp).not.toContain('unsafe-inline')
  expect(csp).not.toContain('unsafe-eval')
  const page = await res.text()
  const assets = [...page.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1])
  expect(assets.some((a) => a.endsWith('.js'))).toBe(true)
  expect(assets.some((a) => a.endsWith('.css'))).toBe(true)
  // Nothing in the page points at another origin.
  expect(page).not.toMatch(/(?:src|href)="(?:https?:)?\/\//)
  for (const a of assets) {
    const r = await fetch(h.node.url + a)
    expect(r.status).toBe(200)
    expect(r.headers.get('content-security-policy')).toBe(csp)
    expect(r.headers.get('cache-control')).toContain('immutable')
    const body = await r.text()
    expect(body).not.toMatch(/https?:\/\/(?:fonts|cdn|unpkg|jsdelivr)/)
  }
  expect((await fetch(h.node.url + '/console/')).status).toBe(200)
}, 30_000) // the first request bundles the console

test('an unknown asset is a 404 and the API document does not list the console', async () => {
  const res = await fetch(h.node.url + '/console/assets/nope.js')
  expect(res.status).toBe(404)
  const doc = await (await fetch(h.node.url + '/docs/json')).json()
  expect(Object.keys(doc.paths).filter((p) => p.startsWith('/console'))).toEqual([])
})

test('the bundle holds none of the server: the pages read the API models as types only', async () => {
  const page = await (await fetch(h.node.url + '/console')).text()
  const scripts = [...page.matchAll(/src="(\/console\/assets\/[^"]+\.js)"/g)].map((m) => m[1])
  expect(scripts.length).toBeGreaterThan(0)
  const js = (await Promise.all(scripts.map(async (s) => (await fetch(h.node.url + s)).text()))).join('\n')
  // A value import of a model would bring TypeBox (its kind symbol), Elysia and the schemas' own texts.
  expect(js).not.toContain('TypeBox.Kind')
  expect(js).not.toMatch(/elysia/i)
  expect(js).not.toContain('Effective status: a key past expires_at')
}, 30_000)

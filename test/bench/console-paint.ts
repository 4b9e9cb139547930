// `bun test/bench/console-paint.ts`: how fast the console's overview paints in Chromium, and how much
// it ships. Starts a node (embedded PGlite, or DATABASE_URL), seeds an account with a product, keys
// and activations from a few countries, then opens /console#/overview signed in, in a fresh browser
// context each round (nothing cached), and prints Chromium's own timings: first-contentful-paint and
// the moment the overview's cards and chart are on screen. Also prints the bundle's size, raw and gzip.
// Prints figures; asserts nothing (benchmarks are programs, not tests).
//
//   bun test/bench/console-paint.ts            ROUNDS=10 bun test/bench/console-paint.ts
import { loadavg } from 'node:os'
import { launchChromium } from '../support/chromium'
import { newKey, newProduct, startHarness } from '../support/harness'
import { median } from './stats'

const ROUNDS = Number(process.env.ROUNDS ?? 7)
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`

const h = await startHarness()
try {
  const acct = await h.account('growth')
  const product = await newProduct(h.call, acct.token, 'desk-app')
  const countries = ['DE', 'US', 'FR', 'JP', 'BR', 'GB']
  for (let i = 0; i < 30; i++) {
    const key = await newKey(h.call, acct.token, product.id)
    const device_fingerprint = i.toString(16).padStart(64, 'b')
    await h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint }, headers: { 'cf-ipcountry': countries[i % countries.length] } })
  }

  // The bundle as a browser receives it.
  const t0 = performance.now()
  const index = await (await fetch(h.node.url + '/console')).text()
  console.log(`first /console request (bundles the console): ${(performance.now() - t0).toFixed(0)} ms`)
  const assets = [...index.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1])
  let js = 0
  let jsGz = 0
  let css = 0
  let cssGz = 0
  for (const a of assets) {
    const body = new Uint8Array(await (await fetch(h.node.url + a)).arrayBuffer())
    const gz = Bun.gzipSync(body).byteLength
    if (a.endsWith('.js')) (js += body.byteLength), (jsGz += gz)
    else if (a.endsWith('.css')) (css += body.byteLength), (cssGz += gz)
  }
  console.log(`JavaScript: ${kb(js)} raw, ${kb(jsGz)} gzip (budget 300 KB gzip)`)
  console.log(`CSS:        ${kb(css)} raw, ${kb(cssGz)} gzip`)

  const browser = await launchChromium()
  const session = JSON.stringify({ token: acct.token, mode: 'account', accountId: acct.id })
  const fcp: number[] = []
  const ready: number[] = []
  for (let round = 0; round <= ROUNDS; round++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    // Signed in as the console would be after the sign-in form: the session is in sessionStorage.
    await context.addInitScript((s) => sessionStorage.setItem('keyward.console.session', s), session)
    const page = await context.newPage()
    await page.goto(h.node.url + '/console#/overview')
    await page.locator('.card-value').first().waitFor()
    await page.locator('.chart canvas').first().waitFor()
    await page.locator('.hbars').waitFor()
    const t = await page.evaluate(() => ({
      fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
      ready: performance.now(),
    }))
    await context.close()
    if (round === 0) continue // warm-up: Chromium's own first start
    fcp.push(t.fcp)
    ready.push(t.ready)
  }
  await browser.close()
  const f = (xs: number[]) => `median ${median(xs).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms`
  console.log(`overview first-contentful-paint (${ROUNDS} cold contexts): ${f(fcp)} (budget 1000 ms)`)
  console.log(`overview cards + charts on screen:                ${f(ready)}`)
  console.log(`machine load average (1 min) at the end: ${loadavg()[0].toFixed(1)}`)
} finally {
  await h.close()
}

// /docs renders in a real browser with every other origin blocked (an air-gapped site): headless
// Chromium (Debian's package) loads /docs and /docs/, and the route list must appear. Screenshots at
// 1280 and 390 px wide, light and dark, go to test-output/ for a person to look at.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, mkdirSync } from 'node:fs'
import { useChromium } from '../support/chromium'
import { startHarness, type Harness } from '../support/harness'

setDefaultTimeout(120_000)

let h: Harness
const chromium = await useChromium('http/docs-browser', {
  setUp: async () => {
    h = await startHarness()
  },
  tearDown: () => h?.close(),
})
const present = chromium.present

async function open(path: string, colorScheme: 'light' | 'dark' = 'light', width = 1280, waitFor = 'Liveness: 200 while the process runs') {
  const page = await chromium.browser.newPage({ viewport: { width, height: 900 }, colorScheme })
  const origin = new URL(h.node.url).origin
  const elsewhere: string[] = []
  const failedHere: string[] = []
  // Every request to another origin is aborted and recorded: the page must need none.
  await page.route('**/*', (route) => {
    const url = route.request().url()
    if (url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue()
    elsewhere.push(url)
    return route.abort()
  })
  // The page runs under its CSP (same as the console's, styles aside): nothing it needs may be refused.
  const refused: string[] = []
  page.on('console', (message) => {
    if (message.text().includes('Content Security Policy')) refused.push(message.text().slice(0, 160))
  })
  page.on('response', (res) => {
    if (res.url().startsWith(origin) && res.status() >= 400) failedHere.push(`${res.status()} ${res.url()}`)
  })
  await page.goto(origin + path, { waitUntil: 'load' })
  // An operation's summary, from the spec the page fetched: the route list rendered.
  await page.getByText(waitFor, { exact: false }).first().waitFor({ state: 'visible', timeout: 90_000 })
  return { page, elsewhere, failedHere, refused }
}

test.skipIf(!present)('/docs and /docs/ render the route list with no other origin reachable', async () => {
  for (const path of ['/docs', '/docs/']) {
    const { page, elsewhere, failedHere, refused } = await open(path)
    expect({ path, elsewhere, failedHere, refused }).toEqual({ path, elsewhere: [], failedHere: [], refused: [] })
    expect((await page.request.get(new URL(h.node.url).origin + path)).headers()['content-security-policy']).toContain("frame-ancestors 'none'")
    const text = await page.locator('body').innerText()
    // The first group's operations, and every tag of the API in the sidebar.
    for (const summary of ['Readiness: each dependency ok, down or embedded', 'Prometheus metrics']) expect(text).toContain(summary)
    for (const tag of ['Operator', 'API keys', 'Products', 'License keys', 'Validation', 'Analytics', 'Offline licenses', 'Webhooks']) {
      expect(text).toContain(tag)
    }
    await page.close()
  }
})

test.skipIf(!present)('screenshots at 1280 and 390 px, light and dark (test-output/)', async () => {
  mkdirSync('test-output', { recursive: true })
  for (const width of [1280, 390]) {
    for (const scheme of ['light', 'dark'] as const) {
      // A phone-wide page hides the sidebar: wait for the document's own introduction there.
      const { page, elsewhere } = await open('/docs', scheme, width, width < 800 ? 'License keys for software vendors' : undefined)
      expect(elsewhere).toEqual([])
      const file = `test-output/docs-${width}-${scheme}.png`
      await page.screenshot({ path: file })
      expect(existsSync(file)).toBe(true)
      await page.close()
    }
  }
})

// Drives Debian's Chromium for the console's end-to-end tests: one browser per file, every request the
// page makes recorded (to prove it never leaves the node's origin), screenshots at two widths and in
// both colour schemes under test-output/console/.
import { mkdirSync } from 'node:fs'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { launchChromium } from '../support/chromium'


export const SHOTS_DIR = new URL('../../test-output/console/', import.meta.url).pathname

export interface Console {
  browser: Browser
  context: BrowserContext
  page: Page
  /** Every URL the page requested, in order. */
  requests: string[]
  /** Console errors and uncaught exceptions of the page. */
  errors: string[]
  /** Resolves once no request of the page has been in flight for 100 ms (a page that loads in parts has loaded). */
  settled(): Promise<void>
  /**
   * Screenshots of the page as it is now: 1280 and 390 px wide, light and dark. The whole page, or
   * with `viewport` what the screen shows (a modal dialog: its backdrop covers the screen, not the page).
   */
  shoot(name: string, opts?: { viewport?: boolean }): Promise<void>
  close(): Promise<void>
}

/**
 * The form controls, buttons and links of the page that have no accessible name: no <label>, no
 * aria-label(ledby), no text. Each is described by its tag and id or first classes.
 */
export function unlabelledControls(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const named = (el: Element) => {
      if (el.getAttribute('aria-label')?.trim()) return true
      const by = el.getAttribute('aria-labelledby')
      if (by && by.split(/\s+/).some((id) => document.getElementById(id)?.textContent?.trim())) return true
      if ((el as HTMLInputElement).labels?.length) return [...(el as HTMLInputElement).labels!].some((l) => l.textContent?.trim())
      if (el.matches('button, a, summary')) return !!el.textContent?.trim()
      return false
    }
    return [...document.querySelectorAll('input:not([type=hidden]), select, textarea, button, a[href], summary')]
      .filter((el) => !named(el))
      .map((el) => `<${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${el.className ? '.' + String(el.className).split(' ').join('.') : ''}>`)
  })
}

/** `timezoneId`: the browser's time zone (e.g. far from UTC, to show what a page reads as UTC). */
/**
 * The console of `baseUrl` in a browser, signed in with an account's `token` and on its overview: the
 * start of most console tests (the first request bundles the console, so it is made before the clock
 * of the browser's waits starts).
 */
export async function signedInConsole(baseUrl: string, token: string, opts: { timezoneId?: string } = {}): Promise<Console> {
  await fetch(baseUrl + '/console')
  const c = await openConsole(baseUrl, opts)
  await c.page.goto(baseUrl + '/console')
  await c.page.getByLabel('Token').fill(token)
  await c.page.getByRole('button', { name: 'Sign in' }).click()
  await c.page.getByRole('heading', { name: 'Overview' }).waitFor()
  return c
}

export async function openConsole(baseUrl: string, opts: { timezoneId?: string } = {}): Promise<Console> {
  const browser = await launchChromium()
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light', ...opts })
  const page = await context.newPage()
  page.setDefaultTimeout(20_000)
  const requests: string[] = []
  const errors: string[] = []
  // Every request is recorded; one to another origin is also aborted, as on an air-gapped site.
  const origin = new URL(baseUrl).origin
  await context.route('**/*', (route) => {
    const url = route.request().url()
    requests.push(url)
    if (url.startsWith(origin + '/') || url.startsWith('data:') || url.startsWith('blob:')) return route.continue()
    return route.abort()
  })
  let inFlight = 0
  page.on('request', () => void inFlight++)
  page.on('requestfinished', () => void inFlight--)
  page.on('requestfailed', () => void inFlight--)
  page.on('pageerror', (e) => errors.push(String(e)))
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text())
  })
  // confirm() before destructive actions: the tests answer yes.
  page.on('dialog', (d) => void d.accept())
  mkdirSync(SHOTS_DIR, { recursive: true })
  return {
    browser,
    context,
    page,
    requests,
    errors,
    async settled() {
      const deadline = Date.now() + 20_000
      let quietSince = Date.now()
      while (Date.now() < deadline) {
        if (inFlight > 0) quietSince = Date.now()
        else if (Date.now() - quietSince >= 100) return
        await page.waitForTimeout(20)
      }
      throw new Error(`the page still had ${inFlight} request(s) in flight after 20 s`)
    },
    async shoot(name, opts = {}) {
      // Every control on screen has a name a screen reader can say (the console's rule, checked on every page shot).
      const unnamed = await unlabelledControls(page)
      if (unnamed.length) throw new Error(`${name}: controls without a label: ${unnamed.join(', ')}`)
      for (const width of [1280, 390]) {
        for (const scheme of ['light', 'dark'] as const) {
          await page.setViewportSize({ width, height: width > 500 ? 900 : 844 })
          await page.emulateMedia({ colorScheme: scheme })
          await page.waitForTimeout(150) // let the charts redraw for the new size and colours
          await page.screenshot({ path: `${SHOTS_DIR}${name}-${width}-${scheme}.png`, fullPage: !opts.viewport })
        }
      }
      await page.setViewportSize({ width: 1280, height: 900 })
      await page.emulateMedia({ colorScheme: 'light' })
    },
    async close() {
      await browser.close()
    },
  }
}

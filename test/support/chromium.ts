// Debian's Chromium for the browser tests, started the one way this machine allows: headless, no
// sandbox (root), and none of the background connections a closed network refuses by the dozen.
import { afterAll, beforeAll } from 'bun:test'
import { chromium, type Browser } from 'playwright-core'
import { CHROMIUM, requireChromium } from './environment'

export { CHROMIUM }

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

export const launchChromium = (): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })

export interface ChromiumFixture {
  /** Whether Chromium is there (false: the file's tests skip, or fail under CI; see environment.ts). */
  present: boolean
  /** The browser, launched before the file's tests (after `setUp`, if given). */
  readonly browser: Browser
}

/**
 * The browser setup every browser test file shares, called at the top of the file: checks Chromium
 * (`requireChromium`), then one `beforeAll` runs `setUp` (the file's servers) and launches the browser,
 * and one `afterAll` closes the browser and then runs `tearDown`. Tests use `test.if(fixture.present)`.
 */
export async function useChromium(
  file: string,
  hooks: { setUp?: () => Promise<void> | void; tearDown?: () => Promise<void> | void } = {},
): Promise<ChromiumFixture> {
  const present = await requireChromium(file)
  let browser: Browser | null = null
  beforeAll(async () => {
    if (!present) return
    await hooks.setUp?.()
    browser = await launchChromium()
  }, 180_000)
  afterAll(async () => {
    await browser?.close()
    await hooks.tearDown?.()
  })
  return {
    present,
    get browser() {
      if (!browser) throw new Error('Chromium is not running (missing, or asked for before beforeAll)')
      return browser
    },
  }
}

// Debian's Chromium for the browser tests, started the one way this machine allows: headless, no
// sandbox (root), and none of the background connections a closed network refuses by the dozen.
import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'

export const CHROMIUM = '/usr/bin/chromium'

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

/** Whether Chromium is installed; a file whose tests need it says why it skips (`.ci/run` installs it). */
export function chromiumPresent(file: string): boolean {
  const present = existsSync(CHROMIUM)
  if (!present) console.warn(`${file}: skipped, ${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`)
  return present
}

export const launchChromium = (): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })

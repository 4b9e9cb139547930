// The end-user page in Chromium (docs/api.md, "The end-user page"): the whole exchange done in the page.
// The test plays the offline device the way the SDK does, with WebCrypto Ed25519 in the browser: it
// makes a request code, pastes it, gets the response code (copied with the button, drawn as a QR code),
// checks the license's nonce and signature, then signs a deactivation code and gets the receipt. Every
// request the page makes stays on the node's origin, and the page fits 390 px. Screenshots at 1280 and
// 390 px, light and dark, go to docs/console-screenshots/portal-*.png.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { mkdirSync } from 'node:fs'
import { useChromium } from '../support/chromium'
import { fingerprint, newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { licenseOfResponse, receiptOf, receiptVerifies } from '../support/air-gapped'
import { payloadOf, verifiesWith } from '../support/offline'
import { rootKeyOf } from '../support/signing'

setDefaultTimeout(120_000)
const SHOTS = new URL('../../docs/console-screenshots/', import.meta.url).pathname

let h: Harness
const chromium = await useChromium('air-gapped/portal-browser', {
  setUp: async () => {
    h = await startHarness()
  },
  tearDown: async () => {
    await h?.close()
  },
})

test.skipIf(!chromium.present)('the whole exchange in the page: request → response code (copy, QR) → deactivation → receipt', async () => {
  const { token, id: accountId } = await h.account()
  const product = await newProduct(h.call, token)
  await h.call('PUT', `/v1/products/${product.id}`, { token, body: { offline_portal: true, name: 'Acme CAD' } })
  const key = await newKey(h.call, token, product.id)
  const root = (await h.call('GET', '/v1/offline/public-key', { token })).body
  const origin = new URL(h.node.url).origin

  const context = await chromium.browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin })
  const page = await context.newPage()
  page.setDefaultTimeout(20_000)
  const requests: string[] = []
  const errors: string[] = []
  page.on('request', (r) => requests.push(r.url()))
  page.on('pageerror', (e) => errors.push(String(e)))
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text())
  })
  mkdirSync(SHOTS, { recursive: true })
  const shoot = async (name: string) => {
    for (const scheme of ['light', 'dark'] as const) {
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: width === 390 ? 844 : 900 })
        await page.emulateMedia({ colorScheme: scheme })
        // nothing wider than the screen at 390 px
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
        await page.screenshot({ path: `${SHOTS}portal-${name}-${width}-${scheme}.png`, fullPage: true })
      }
    }
    await page.setViewportSize({ width: 1280, height: 900 })
    await page.emulateMedia({ colorScheme: 'light' })
  }

  await page.goto(`${origin}/portal/${product.id}/offline`, { waitUntil: 'networkidle' })
  expect(await page.textContent('[data-product]')).toBe('Acme CAD')
  await shoot('empty')

  // The device: an Ed25519 pair made with WebCrypto, and the request code, as the SDK makes them.
  const fp = fingerprint()
  const device = await page.evaluate(
    async ({ key, fp }) => {
      const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair
      const raw = new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey))
      const b64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
      const nonce = b64url(crypto.getRandomValues(new Uint8Array(18)))
      const body = { v: 1, key, device_fingerprint: fp, device_public_key: b64url(raw), nonce, t: Date.now() }
      const request = 'KWREQ1.' + b64url(new TextEncoder().encode(JSON.stringify(body)))
      ;(globalThis as any).devicePrivateKey = pair.privateKey
      return { request, nonce, publicKey: b64url(raw) }
    },
    { key: key.key_value, fp },
  )
  await page.fill('#request', device.request)
  await page.click('#activate button[type=submit]')
  await page.waitForSelector('#activate-answer textarea[data-result]')
  const response = await page.inputValue('#activate-answer textarea[data-result]')
  expect(response.startsWith('KWRES1.')).toBe(true)
  const license = licenseOfResponse(response)
  expect(verifiesWith(root.public_key_pem, license)).toBe(true)
  const payload = payloadOf(license)
  expect(payload).toMatchObject({ request_nonce: device.nonce, device_public_key: device.publicKey, device_fingerprint: fp, account_id: accountId })
  // the copy button puts exactly the response code on the clipboard
  await page.click('#activate-answer button.primary')
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(response)
  // a QR code is drawn (an SVG with modules)
  const qr = await page.$eval('#activate-answer .qr svg path', (p) => p.getAttribute('d')!.length)
  expect(qr).toBeGreaterThan(1000)
  await shoot('activated')

  // The deactivation, signed by the device key in the browser.
  const code = await page.evaluate(
    async ({ license_id, activation_id, fp }) => {
      const b64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
      const signed = 'KWDEA1.' + b64url(new TextEncoder().encode(JSON.stringify({ v: 1, license_id, activation_id, device_fingerprint: fp, t: Date.now() })))
      const sig = new Uint8Array(await crypto.subtle.sign({ name: 'Ed25519' }, (globalThis as any).devicePrivateKey, new TextEncoder().encode(signed)))
      return `${signed}.${b64url(sig)}`
    },
    { license_id: payload.id, activation_id: payload.activation_id, fp },
  )
  await page.fill('#code', code)
  await page.click('#deactivate button[type=submit]')
  await page.waitForSelector('#deactivate-answer textarea[data-result]')
  const receipt = receiptOf(await page.inputValue('#deactivate-answer textarea[data-result]'))
  expect(receipt.body).toMatchObject({ activation_id: payload.activation_id, license_id: payload.id, kid: root.kid })
  expect(receiptVerifies(receipt, rootKeyOf(root.public_key))).toBe(true)
  const [act] = await h.node.deps.sql`select status, deactivation_reason from activations where id = ${payload.activation_id}`
  expect(act).toEqual({ status: 'deactivated', deactivation_reason: 'user' })
  await shoot('released')

  // A code pasted twice in a row with a typo: a clear message, no result
  await page.fill('#request', device.request.slice(0, -3) + 'xyz')
  await page.click('#activate button[type=submit]')
  await page.waitForSelector('#activate-answer .error')
  expect(await page.textContent('#activate-answer .error')).toContain('Not done')
  await page.fill('#request', device.request) // the used code: its seat was released
  await page.click('#activate button[type=submit]')
  await page.waitForFunction(() => document.querySelector('#activate-answer .error')?.textContent?.includes('already used'))
  await shoot('error')

  expect(errors.filter((e) => !e.includes('Failed to load resource'))).toEqual([])
  expect(requests.length).toBeGreaterThan(3)
  for (const url of requests) expect(new URL(url).origin).toBe(origin)
  await context.close()
})

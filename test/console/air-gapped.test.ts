// Air-gapped activation in the console, in a real Chromium against a real node (docs/integrating.md,
// "Customers without a network"): the product's edit form turns its end-user page on (read back from
// the API) and the list links to /portal/:product_id/offline, which the node serves; on the key page a
// seat taken by an air-gapped device is marked as such and a seat taken by validate is not, in the
// devices table and the history. Screenshots at 1280 and 390 px, light and dark.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { fingerprint, newKey, newProduct, scopedToken, startHarness, type Harness } from '../support/harness'
import { Keyward, memoryStorage } from '../../client/src/index.ts'
import { openConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let validateToken: string
let product: { id: string; name: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  validateToken = await scopedToken(h.call, acct.token, 'validate')
  product = await newProduct(h.call, acct.token, 'lab-suite')
  await fetch(h.node.url + '/console') // the first request bundles the console
  c = await openConsole(h.node.url)
  await c.page.goto(h.node.url + '/console')
  await c.page.getByLabel('Token').fill(acct.token)
  await c.page.getByRole('button', { name: 'Sign in' }).click()
  await c.page.getByRole('navigation', { name: 'Console' }).waitFor()
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

test('the product form turns the end-user page on and off; the list links to it', async () => {
  const { page } = c
  await page.goto(`${h.node.url}/console#/products`)
  await page.getByRole('button', { name: `Edit ${product.name}` }).click()
  const box = page.getByLabel('End-user page for activation without internet')
  expect(await box.isChecked()).toBe(false)
  await box.check()
  await c.shoot('product-portal-form')
  await page.getByRole('button', { name: 'Save' }).click()
  const link = page.getByRole('link', { name: 'Offline activation page' })
  await link.waitFor()
  expect((await h.call('GET', `/v1/products/${product.id}`, { token: acct.token })).body.offline_portal).toBe(true)
  const href = await link.getAttribute('href')
  expect(href).toBe(`${h.node.url}/portal/${product.id}/offline`)
  expect((await fetch(href!)).status).toBe(200) // the node serves the page once it is on
  await c.shoot('product-portal-on')

  // Off again: the link goes, and the page answers 404 like an unknown product.
  await page.getByRole('button', { name: `Edit ${product.name}` }).click()
  await page.getByLabel('End-user page for activation without internet').uncheck()
  await page.getByRole('button', { name: 'Save' }).click()
  await page.getByRole('form', { name: `Edit ${product.name}` }).waitFor({ state: 'detached' })
  await link.waitFor({ state: 'detached' }) // once the list is read again
  expect((await h.call('GET', `/v1/products/${product.id}`, { token: acct.token })).body.offline_portal).toBe(false)
  expect((await fetch(href!)).status).toBe(404)
}, FLOW)

test('the key page marks the seat of an air-gapped device, not the one taken by validate', async () => {
  const { page } = c
  const key = await newKey(h.call, acct.token, product.id, { activation_limit: 3 })
  // A device online: validate.
  const online = new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey: (await h.call('GET', '/v1/offline/public-key', { token: validateToken })).body.public_key, productId: product.id, storage: memoryStorage(), fingerprint: fingerprint() })
  expect((await online.validate({ key: key.key_value, deviceName: 'Office laptop' })).valid).toBe(true)
  // A device without a network: its request code carried to the API by the vendor's page.
  const gapped = new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey: (await h.call('GET', '/v1/offline/public-key', { token: validateToken })).body.public_key, productId: product.id, storage: memoryStorage(), fingerprint: fingerprint() })
  const request = await gapped.offlineActivationRequest({ key: key.key_value, deviceName: 'Ship bridge PC' })
  const activated = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request } })
  expect(activated.status).toBe(201)

  await page.goto(`${h.node.url}/console#/keys/${key.id}`)
  const devices = page.locator('section[aria-labelledby="dev-h"]')
  const gappedRow = devices.locator('tr', { hasText: 'Ship bridge PC' })
  const onlineRow = devices.locator('tr', { hasText: 'Office laptop' })
  await gappedRow.locator('.badge.offline', { hasText: 'air-gapped' }).waitFor()
  await onlineRow.waitFor()
  expect(await onlineRow.locator('.badge.offline').count()).toBe(0)
  expect(await page.locator('section[aria-labelledby="hist-h"] .badge.offline').count()).toBe(1)
  await c.settled()
  await c.shoot('key-air-gapped')
  expect(c.requests.every((u) => u.startsWith(h.node.url))).toBe(true)
  expect(c.errors).toEqual([])
}, FLOW)

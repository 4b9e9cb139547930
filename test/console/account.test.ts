// The console in a real Chromium against a real node, as a vendor's admin: sign-in, every page's main
// flow, errors shown next to their fields, a missing scope named, sign-out. Every request the page
// makes is recorded; the last test proves none left the node's origin.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, scopedToken, startHarness, type Harness } from '../support/harness'
import { startReceiver, type Receiver } from '../webhooks/receiver'
import { openConsole, type Console } from './browser'

const FLOW = 90_000 // a browser flow of several pages on a loaded machine
let h: Harness
let c: Console
let acct: { id: string; token: string }
let rx: Receiver
const fp = (n: number) => n.toString(16).padStart(64, 'a')

beforeAll(async () => {
  h = await startHarness({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' })
  acct = await h.account('growth')
  rx = startReceiver()
  await fetch(h.node.url + '/console') // the first request bundles the console: not part of any flow below
  c = await openConsole(h.node.url)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await rx?.stop()
  await h?.close()
}, 30_000)

/** Follows an entry of the console's navigation. */
const nav = (name: string) => c.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name }).click()

async function signIn(token: string) {
  await c.page.goto(h.node.url + '/console')
  await c.page.getByLabel('Token').fill(token)
  await c.page.getByRole('button', { name: 'Sign in' }).click()
}

test('a wrong token is refused in place; the right one opens the overview and stays out of the URL', async () => {
  const { page } = c
  await signIn('kw_' + 'x'.repeat(32))
  await page.locator('#token-error').waitFor()
  expect(await page.locator('#token-error').textContent()).toContain('not accepted')
  await c.shoot('signin')
  await page.getByLabel('Token').fill(acct.token)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { name: 'Overview' }).waitFor()
  expect(await page.getByText('Loading the console…').count()).toBe(0) // the boot shell is gone
  expect(page.url()).not.toContain(acct.token)
  expect(await page.evaluate(() => document.cookie)).toBe('')
  expect(await page.evaluate(() => JSON.stringify(sessionStorage))).toContain(acct.token)
  expect(await page.evaluate(() => JSON.stringify(localStorage))).not.toContain(acct.token)
}, FLOW)

test('products: create, a taken slug shown next to its field, edit, and the 422 of a delete in words', async () => {
  const { page } = c
  await nav('Products')
  await page.getByRole('button', { name: 'New product' }).click()
  await page.getByLabel('Name', { exact: true }).fill('Desk App')
  expect(await page.getByLabel('Slug').inputValue()).toBe('desk-app')
  await page.getByRole('button', { name: 'Create product' }).click()
  await page.getByRole('cell', { name: 'desk-app' }).waitFor()
  // The same slug again: 409 slug_taken, shown under the slug field.
  await page.getByRole('button', { name: 'New product' }).click()
  await page.getByLabel('Name', { exact: true }).fill('Desk App')
  await page.getByRole('button', { name: 'Create product' }).click()
  await page.locator('#new-product-slug-error').waitFor()
  expect(await page.locator('#new-product-slug-error').textContent()).toContain('desk-app')
  // An invalid slug: the 400's errors[] entry lands under the slug field.
  await page.getByLabel('Slug').fill('Not A Slug')
  await page.getByRole('button', { name: 'Create product' }).click()
  await page.waitForFunction(() => !document.querySelector('#new-product-slug-error')?.textContent?.includes('desk-app'))
  await page.locator('#new-product-slug-error').waitFor()
  await c.shoot('products-error')
  await page.getByRole('button', { name: 'Cancel' }).click()

  const products = (await h.call('GET', '/v1/products', { token: acct.token })).body.data
  expect(products.map((p: any) => p.slug)).toEqual(['desk-app'])
  await page.getByRole('button', { name: 'Edit Desk App' }).click()
  await page.getByLabel('Description (optional)').fill('The desktop application')
  await page.getByRole('button', { name: 'Save' }).click()
  await page.getByText('The desktop application').waitFor()
  expect((await h.call('GET', `/v1/products/${products[0].id}`, { token: acct.token })).body.description).toBe('The desktop application')

  await newKey(h.call, acct.token, products[0].id)
  await page.getByRole('button', { name: 'Delete Desk App' }).click()
  await page.getByText('still has active license keys').waitFor()
  expect((await h.call('GET', `/v1/products/${products[0].id}`, { token: acct.token })).status).toBe(200)
  await c.shoot('products')
}, FLOW)

test('keys: create (shown once), validate from outside, the device appears, release it, extend, offline license, revoke', async () => {
  const { page } = c
  await nav('License keys')
  await page.getByRole('button', { name: 'New key' }).click()
  await page.getByLabel('Devices allowed').fill('2')
  await page.getByLabel('Plan (optional)').fill('pro')
  await page.getByRole('button', { name: 'Create key' }).click()
  const value = await page.getByLabel('License key', { exact: true }).inputValue()
  expect(value).toMatch(/^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}$/)
  await c.shoot('key-created')
  await page.getByRole('link', { name: 'Open the key' }).click()
  await page.getByRole('heading', { name: /^Key / }).waitFor()
  expect(await page.getByText('No device holds this key right now.').count()).toBe(1)

  // A shipped application validates: the device shows up on the key's page.
  const res = await h.call('POST', '/v1/validate', { token: acct.token, body: { key: value, device_fingerprint: fp(1), app_version: '2.1.0' }, headers: { 'cf-ipcountry': 'DE' } })
  expect(res.body.valid).toBe(true)
  await page.reload()
  await page.getByRole('button', { name: `Release device ${fp(1).slice(0, 12)}…` }).waitFor()
  await page.getByText('2.1.0').waitFor()
  await c.shoot('key')
  await page.getByRole('button', { name: `Release device ${fp(1).slice(0, 12)}…` }).click()
  await page.getByText('No device holds this key right now.').waitFor()
  await page.getByText('admin', { exact: true }).waitFor() // the history names the reason

  const keyId = page.url().split('/').pop()!
  const detail = (await h.call('GET', `/v1/keys/${keyId}`, { token: acct.token })).body
  expect(detail.activations.map((a: any) => a.status)).toEqual(['deactivated'])
  expect(detail.activations[0].deactivation_reason).toBe('admin')

  // Extend to a date: the key's expiry becomes the end of that day, UTC.
  await page.getByLabel('Expires at the end of').fill('2031-05-04')
  await page.getByRole('button', { name: 'Save expiry' }).click()
  await page.waitForFunction(() => document.body.textContent?.includes('2031'))
  expect((await h.call('GET', `/v1/keys/${keyId}`, { token: acct.token })).body.expires_at).toBe('2031-05-04T23:59:59.000Z')

  // Offline license: a malformed fingerprint is explained under its field, then a good one issues.
  await page.getByLabel('Device fingerprint (64 hex characters)').fill('nothex')
  await page.getByRole('button', { name: 'Issue license' }).click()
  await page.locator('#off-fp-error').waitFor()
  await page.getByLabel('Device fingerprint (64 hex characters)').fill(fp(2))
  await page.getByRole('button', { name: 'Issue license' }).click()
  const license = page.getByLabel(/^License \(valid until/)
  await license.waitFor()
  expect(await license.inputValue()).toContain('-----BEGIN KEYWARD LICENSE-----')
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /^Download / }).click()])
  expect(download.suggestedFilename()).toMatch(/\.lic$/)

  // Revoke with a reason.
  await page.getByLabel('Reason (optional)').fill('refund')
  await page.getByRole('button', { name: 'Revoke key' }).click()
  await page.getByText('(refund)').waitFor()
  const revoked = (await h.call('GET', `/v1/keys/${keyId}`, { token: acct.token })).body
  expect(revoked.status).toBe('revoked')
  expect(revoked.revoke_reason).toBe('refund')
  expect((await h.call('POST', '/v1/validate', { token: acct.token, body: { key: value, device_fingerprint: fp(2) } })).body.reason).toBe('revoked')
}, FLOW)

test('keys list: filters by status and pages through', async () => {
  const { page } = c
  const product = await newProduct(h.call, acct.token, 'second-app')
  for (let i = 0; i < 21; i++) await newKey(h.call, acct.token, product.id)
  await nav('License keys')
  const total = (await h.call('GET', '/v1/keys', { token: acct.token })).body.total
  expect(total).toBeGreaterThan(21)
  await page.getByText(`1–20 of ${total}`).waitFor()
  await page.getByRole('button', { name: 'Next' }).click()
  await page.getByText(`21–${total} of ${total}`).waitFor()
  await page.getByLabel('Status').selectOption('revoked')
  await page.getByText('1–1 of 1').waitFor()
  await page.getByLabel('Status').selectOption('')
  await page.getByLabel('Product').selectOption({ label: 'second-app' })
  await page.getByText('of 21').waitFor()
  await page.getByLabel('Product').selectOption('')
  await c.shoot('keys')
}, FLOW)

test('overview: cards, the activations chart with its range switch, geography', async () => {
  const { page } = c
  await nav('Overview')
  await page.getByText('Activations by country').waitFor()
  await page.getByRole('row', { name: /Germany|DE/ }).waitFor()
  await page.locator('.chart canvas').waitFor()
  const before = c.requests.length
  await page.getByRole('button', { name: '7 days' }).click()
  await page.waitForFunction(() => document.querySelector('button[aria-pressed="true"]')?.textContent === '7 days')
  await page.waitForTimeout(300)
  expect(c.requests.slice(before).some((u) => u.includes('range=7d'))).toBe(true)
  await c.shoot('overview')
}, FLOW)

test('webhooks: create (secret shown once), send a test to a local receiver, see the attempt, disable', async () => {
  const { page } = c
  await nav('Webhooks')
  await page.getByRole('button', { name: 'New webhook' }).click()
  await page.getByLabel('Endpoint URL').fill('ftp://nope')
  await page.getByRole('button', { name: 'Create webhook' }).click()
  await page.locator('#wh-url-error, .alert').first().waitFor()
  await page.getByLabel('Endpoint URL').fill(rx.url('/hook'))
  await page.getByRole('button', { name: 'Create webhook' }).click()
  const secret = await page.getByLabel('Signing secret').inputValue()
  expect(secret).toMatch(/^whsec_/)
  rx.expect('/hook', secret)
  await page.getByRole('link', { name: 'Open the webhook' }).click()
  await page.getByRole('button', { name: 'Send a test' }).click()
  await rx.waitFor((all) => all.some((r) => r.path === '/hook' && r.payload?.type === 'key.created'), 20_000, 'the test delivery')
  await page.getByText('delivered').waitFor()
  await page.getByRole('button', { name: 'Disable' }).click()
  await page.getByRole('button', { name: 'Enable' }).waitFor()
  const hooks = (await h.call('GET', '/v1/webhooks', { token: acct.token })).body.data
  expect(hooks[0].is_active).toBe(false)
  await c.shoot('webhook')
  await page.getByRole('button', { name: 'Edit' }).click()
  await page.getByRole('checkbox', { name: 'key.expired' }).check()
  await page.getByRole('button', { name: 'Save' }).click()
  await page.getByRole('form', { name: 'Edit webhook' }).waitFor({ state: 'detached' })
  expect((await h.call('GET', `/v1/webhooks/${hooks[0].id}`, { token: acct.token })).body.events).toContain('key.expired')
}, FLOW)

test('API keys: create with a scope (token shown once), rotate, delete', async () => {
  const { page } = c
  await nav('API keys')
  await page.getByRole('button', { name: 'New API key' }).click()
  await page.getByLabel('Name').fill('desktop app')
  await page.getByLabel('Scope').selectOption('validate')
  await page.getByRole('button', { name: 'Create API key' }).click()
  const token = await page.getByLabel('API token').inputValue()
  expect((await h.call('GET', '/v1/ping', { token })).status).toBe(200)
  await c.shoot('api-keys')
  await page.getByRole('button', { name: 'Rotate desktop app' }).click()
  const rotated = await page.getByLabel('New token for desktop app').inputValue()
  expect(rotated).not.toBe(token)
  expect((await h.call('GET', '/v1/ping', { token })).status).toBe(401)
  expect((await h.call('GET', '/v1/ping', { token: rotated })).status).toBe(200)
  await page.getByRole('button', { name: 'Delete desktop app' }).click()
  await page.getByRole('button', { name: 'Delete desktop app' }).waitFor({ state: 'detached' })
  expect((await h.call('GET', '/v1/ping', { token: rotated })).status).toBe(401)
}, FLOW)

test('a token without a scope a page needs: the page names the scope instead of failing', async () => {
  const { page } = c
  const validateOnly = await scopedToken(h.call, acct.token, 'validate')
  await page.getByRole('button', { name: 'Sign out' }).click()
  expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
  await signIn(validateOnly)
  await page.getByRole('heading', { name: /needs the analytics:read scope/ }).waitFor()
  await c.shoot('scope')
  await nav('License keys')
  await page.getByRole('heading', { name: /needs the keys:read scope/ }).waitFor()
}, FLOW)

test('sign-out forgets the token; a revoked token sends the console back to sign-in', async () => {
  const { page } = c
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByLabel('Token').waitFor()
  expect(await page.evaluate(() => JSON.stringify(sessionStorage))).toBe('{}')
  const doomed = await scopedToken(h.call, acct.token, 'full_access')
  await signIn(doomed)
  await page.getByRole('heading', { name: 'Overview' }).waitFor()
  const keys = (await h.call('GET', '/v1/api-keys', { token: acct.token })).body.data
  await h.call('DELETE', `/v1/api-keys/${keys.find((k: any) => doomed.startsWith(k.token_prefix) && k.scope === 'full_access' && k.name === 'full_access').id}`, { token: acct.token })
  await nav('Products')
  await page.getByText('You were signed out').waitFor()
  expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
}, FLOW)

test('every request the console made went to its own origin, and no page logged an error', () => {
  const origin = new URL(h.node.url).origin
  expect(c.requests.length).toBeGreaterThan(20)
  const foreign = c.requests.filter((u) => !u.startsWith('blob:') && !u.startsWith('data:') && new URL(u).origin !== origin)
  expect(foreign).toEqual([])
  // A 4xx the page asked for on purpose is logged by Chromium as a failed resource; anything else is a bug.
  expect(c.errors.filter((e) => !/status of 4\d\d/.test(e))).toEqual([])
})

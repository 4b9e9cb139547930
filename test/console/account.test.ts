// The console in a real Chromium against a real node, as a vendor's admin: sign-in, every page's main
// flow (overview charts, products, keys and their settings, the key-prefix search, webhooks, API keys,
// the activity trail), errors shown next to their fields, a missing scope named, keyboard use,
// sign-out. Every request the page makes is recorded; the last test proves none left the node's origin.
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
  // the devices section is filled after the heading (its own request): wait for it, then count
  await page.getByText('No device holds this key right now.').waitFor()
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

  // Extend to a date (on the key page's lifecycle tab): the key's expiry becomes the end of that day, UTC.
  await page.getByRole('tab', { name: 'Actions' }).click()
  await page.getByLabel('Expires at the end of (UTC)').fill('2031-05-04')
  await page.getByRole('button', { name: 'Save expiry' }).click()
  await page.getByRole('tab', { name: 'Overview' }).click() // the about panel shows the new expiry
  await page.waitForFunction(() => document.body.textContent?.includes('2031'))
  expect((await h.call('GET', `/v1/keys/${keyId}`, { token: acct.token })).body.expires_at).toBe('2031-05-04T23:59:59.000Z')

  // Offline license: a malformed fingerprint is explained under its field, then a good one issues.
  await page.getByRole('tab', { name: 'Offline' }).click()
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
  await page.getByRole('tab', { name: 'Actions' }).click()
  await page.getByLabel('Reason (optional)').fill('refund')
  await page.getByRole('button', { name: 'Revoke key' }).click()
  await page.getByRole('tab', { name: 'Overview' }).click()
  await page.getByText('(refund)').waitFor()
  const revoked = (await h.call('GET', `/v1/keys/${keyId}`, { token: acct.token })).body
  expect(revoked.status).toBe('revoked')
  expect(revoked.revoke_reason).toBe('refund')
  expect((await h.call('POST', '/v1/validate', { token: acct.token, body: { key: value, device_fingerprint: fp(2) } })).body.reason).toBe('revoked')

  // The key's page links to its own history in the audit trail.
  await page.getByRole('main').getByRole('link', { name: 'Activity' }).click()
  await page.getByRole('heading', { name: 'Activity' }).waitFor()
  expect(await page.getByLabel('About (id)').inputValue()).toBe(keyId)
  const trail = (await h.call('GET', `/v1/events?resource_id=${keyId}&page_size=100`, { token: acct.token })).body
  expect(trail.data.map((e: any) => e.type)).toEqual(expect.arrayContaining(['key.created', 'activation.created', 'activation.deactivated', 'key.extended', 'key.revoked']))
  await page.getByText(`1–${trail.total} of ${trail.total}`).waitFor()
  expect(await page.locator('.feed-item .chip').allTextContents()).toEqual(trail.data.map((e: any) => e.type))
}, FLOW)

test('key settings: limit, plan, release after, holder releases and metadata saved by PATCH; each error next to its field', async () => {
  const { page } = c
  const product = (await h.call('GET', '/v1/products', { token: acct.token })).body.data[0]
  const key = await newKey(h.call, acct.token, product.id, { plan: 'basic', metadata: { customer: 'Initech' } })
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=settings`)
  await page.getByRole('heading', { name: 'Settings' }).waitFor()
  expect(await page.getByLabel('Plan', { exact: true }).inputValue()).toBe('basic')
  expect(JSON.parse(await page.getByLabel('Metadata (JSON object)').inputValue())).toEqual({ customer: 'Initech' })
  const stored = async () => (await h.call('GET', `/v1/keys/${key.id}`, { token: acct.token })).body
  const save = () => page.getByRole('button', { name: 'Save settings' }).click()

  // The API refuses a limit of 0: its errors[] entry (body.activation_limit) lands under that field.
  await page.getByLabel('Devices allowed').fill('0')
  await save()
  await page.locator('#set-limit-error').waitFor()
  expect(await page.locator('#set-limit-error').textContent()).toMatch(/1/)
  expect(await page.locator('.form .alert').count()).toBe(0) // placed, so not repeated above the button
  await page.getByLabel('Devices allowed').fill('5')
  // Not JSON: said under the metadata, nothing sent.
  await page.getByLabel('Metadata (JSON object)').fill('{oops')
  await save()
  await page.locator('#set-meta-error').waitFor()
  expect(await page.locator('#set-meta-error').textContent()).toContain('Not valid JSON')
  expect(await page.locator('#set-limit-error').count()).toBe(0)
  // JSON but not an object: the API says so (body.metadata), under the same field.
  await page.getByLabel('Metadata (JSON object)').fill('[1, 2]')
  await save()
  await page.waitForFunction(() => document.querySelector('#set-meta-error')?.textContent?.includes('object'))
  // Out of range, said in the field's own words.
  await page.getByLabel('Metadata (JSON object)').fill('{"customer": "Initech", "seats": 5}')
  await page.getByLabel('Release an inactive device after').fill('0.5')
  await page.getByLabel('Unit').selectOption('minutes')
  await page.getByLabel('Device releases allowed to the key holder').fill('-1')
  await save()
  await page.locator('#set-release-error').waitFor()
  await page.locator('#set-deact-error').waitFor()
  await c.shoot('key-settings-error')
  expect(await stored()).toMatchObject({ activation_limit: 3, plan: 'basic', metadata: { customer: 'Initech' }, release_after_seconds: null, deactivations_allowed: null })

  await page.getByLabel('Plan', { exact: true }).fill('enterprise')
  await page.getByLabel('Release an inactive device after').fill('2')
  await page.getByLabel('Unit').selectOption('days')
  await page.getByLabel('Device releases allowed to the key holder').fill('1')
  await save()
  await page.getByText('Settings saved.').waitFor()
  expect(await stored()).toMatchObject({
    plan: 'enterprise',
    activation_limit: 5,
    release_after_seconds: 2 * 86400,
    deactivations_allowed: 1,
    metadata: { customer: 'Initech', seats: 5 },
  })
  await page.getByRole('tab', { name: 'Overview' }).click()
  await page.getByText('Released after 2 days').waitFor()
  await page.getByText('0 of 1 allowed').waitFor()
  await page.getByRole('tab', { name: 'Settings' }).click()
  const updated = (await h.call('GET', `/v1/events?type=key.updated&resource_id=${key.id}`, { token: acct.token })).body
  expect(updated.total).toBe(1)
  expect(updated.data[0].actor.type).toBe('api_key')
  await c.shoot('key-settings')

  // Saving again unchanged sends nothing; emptying the two optional limits makes them null again.
  await save()
  await page.getByText('Settings saved.').waitFor()
  expect((await h.call('GET', `/v1/events?type=key.updated&resource_id=${key.id}`, { token: acct.token })).body.total).toBe(1)
  await page.getByLabel('Release an inactive device after').fill('')
  await page.getByLabel('Device releases allowed to the key holder').fill('')
  await save()
  await page.getByText('Settings saved.').waitFor()
  await page.getByRole('tab', { name: 'Overview' }).click()
  await page.getByText('Kept until released').waitFor()
  expect(await stored()).toMatchObject({ release_after_seconds: null, deactivations_allowed: null, plan: 'enterprise', activation_limit: 5 })
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

  // Search by the start of the key value, typed as a customer reads it out (lower case, a dash).
  const target = (await h.call('GET', `/v1/keys?product_id=${product.id}&page_size=1`, { token: acct.token })).body.data[0]
  const same = (await h.call('GET', `/v1/keys?key_prefix=${target.key_prefix}`, { token: acct.token })).body.total
  await page.getByLabel('Key starts with').fill(`${target.key_prefix.toLowerCase()}-`)
  await page.getByText(`1–${same} of ${same}`).waitFor()
  expect(c.requests.some((u) => u.includes(`key_prefix=${target.key_prefix}`))).toBe(true)
  await page.getByRole('link', { name: `Key ${target.key_prefix}…` }).first().waitFor()
  // Two characters: every key starting with them, as the API counts them.
  const two = target.key_prefix.slice(0, 2)
  const twoTotal = (await h.call('GET', `/v1/keys?key_prefix=${two}`, { token: acct.token })).body.total
  await page.getByLabel('Key starts with').fill(two)
  await page.getByText(`1–${twoTotal} of ${twoTotal}`).waitFor()
  await c.shoot('keys-search')
  // Letters no key value has (I, L, O, U): the API's 400 is explained under the field.
  await page.getByLabel('Key starts with').fill('LOU')
  await page.locator('#f-prefix-error').waitFor()
  expect(await page.locator('#f-prefix-error').textContent()).toContain('without I, L, O and U')
  await page.getByLabel('Key starts with').fill('')
  await page.getByText(`1–20 of ${total}`).waitFor()
}, FLOW)

test('overview: cards, activations and validations by outcome with their range switch and product filter, geography, usage', async () => {
  const { page } = c
  // An unknown key: a not_found outcome beside the valid and revoked answers of the keys test.
  const unknown = await h.call('POST', '/v1/validate', { token: acct.token, body: { key: 'ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ', device_fingerprint: fp(9) } })
  expect(unknown.body.reason).toBe('not_found')
  // Outcomes are counted in memory and written every FLUSH_INTERVAL_MS: wait until the API has them.
  const sums = async (q = '') => {
    const days = (await h.call('GET', `/v1/analytics/validations${q}`, { token: acct.token })).body as Record<string, number>[]
    const keys = ['valid', 'activation_limit', 'expired', 'suspended', 'entitlements_missing', 'device_already_used', 'credits_exhausted', 'device_mismatch', 'revoked', 'not_found', 'rate_limited']
    return Object.fromEntries(keys.map((k) => [k, days.reduce((s, d) => s + d[k], 0)]))
  }
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    const s = await sums()
    if (s.valid >= 1 && s.revoked >= 1 && s.not_found >= 1) break
    await Bun.sleep(200)
  }
  const all = await sums()
  // (Asserted one by one: Bun's toMatchObject with expect.any() leaves the matchers in the object it read.)
  expect(all.valid).toBeGreaterThanOrEqual(1)
  expect(all.revoked).toBeGreaterThanOrEqual(1)
  expect(all.not_found).toBeGreaterThanOrEqual(1)

  await nav('Overview')
  await page.getByText('Activations by country').waitFor()
  await page.getByRole('row', { name: /Germany|DE/ }).waitFor()
  await page.locator('.chart canvas').nth(1).waitFor() // both charts drawn
  const usage = (await h.call('GET', '/v1/analytics/overview', { token: acct.token })).body
  await page.getByText(`of ${usage.api_calls_limit_today.toLocaleString('en-US')} a day`, { exact: false }).waitFor()
  // The legend of the stacked chart: each outcome's total over the range, as the API counts them (30 days).
  const legend = page.getByRole('list', { name: /Validations by outcome, last 30 days/ })
  const expected = [
    'Valid ' + all.valid,
    'Device limit ' + all.activation_limit,
    'Expired ' + all.expired,
    'Suspended ' + all.suspended,
    'Missing entitlement ' + all.entitlements_missing,
    'Device used another key ' + all.device_already_used,
    'Credits exhausted ' + all.credits_exhausted,
    'Device mismatch ' + all.device_mismatch,
    'Revoked ' + all.revoked,
    'Unknown key ' + all.not_found,
    'Over daily limit ' + all.rate_limited,
  ]
  const legendIs = (want: string[]) =>
    page.waitForFunction((w) => [...document.querySelectorAll('.legend li')].map((li) => li.textContent?.trim()).join('|') === w.join('|'), want)
  await legendIs(expected)
  expect((await legend.locator('li').allTextContents()).map((t) => t.trim())).toEqual(expected)
  await c.shoot('overview')

  // The range switch asks for 7 days of both series.
  const before = c.requests.length
  await page.getByRole('button', { name: '7 days' }).click()
  await page.getByRole('list', { name: /last 7 days/ }).waitFor()
  expect(c.requests.slice(before).some((u) => u.includes('/v1/analytics/activations?range=7d'))).toBe(true)
  expect(c.requests.slice(before).some((u) => u.includes('/v1/analytics/validations?range=7d'))).toBe(true)
  // A product: both series for that product only; outcomes that belong to no product leave the legend.
  const product = (await h.call('GET', '/v1/products', { token: acct.token })).body.data.find((p: any) => p.slug === 'desk-app')
  const forProduct = await sums(`?range=7d&product_id=${product.id}`)
  await Promise.all([
    page.waitForResponse((r) => r.url().includes(`/v1/analytics/validations?range=7d&product_id=${product.id}`)),
    page.waitForResponse((r) => r.url().includes(`/v1/analytics/activations?range=7d&product_id=${product.id}`)),
    page.getByLabel('Product').selectOption({ label: 'Desk App' }),
  ])
  await page.getByRole('heading', { name: /Desk App/ }).waitFor()
  await legendIs([
    'Valid ' + forProduct.valid,
    'Device limit ' + forProduct.activation_limit,
    'Expired ' + forProduct.expired,
    'Suspended ' + forProduct.suspended,
    'Missing entitlement ' + forProduct.entitlements_missing,
    'Device used another key ' + forProduct.device_already_used,
    'Credits exhausted ' + forProduct.credits_exhausted,
    'Device mismatch ' + forProduct.device_mismatch,
    'Revoked ' + forProduct.revoked,
  ])
  expect(forProduct.valid).toBeGreaterThanOrEqual(1)
  // Every day as a table, for screen readers and exact figures.
  await page.getByText('Every day as a table').click()
  expect(await page.locator('details.numbers tbody tr').count()).toBe(7)
  await c.shoot('overview-product')
  await page.getByLabel('Product').selectOption('')
}, FLOW)

test('webhooks: create (secret shown once), send a test to a local receiver, see the attempt, disable', async () => {
  const { page } = c
  await nav('Webhooks')
  await page.getByRole('button', { name: 'New webhook' }).click()
  await page.getByLabel('Endpoint URL').fill('ftp://nope')
  await page.getByRole('button', { name: 'Create webhook' }).click()
  await page.locator('#wh-url-error, .alert').first().waitFor()
  // The form offers every event type the server emits: the OpenAPI document's webhooks, one per type.
  const doc = await (await fetch(h.node.url + '/docs/json')).json()
  const served = Object.keys(doc.webhooks).sort()
  expect(served.length).toBeGreaterThanOrEqual(17)
  const offered = (await page.locator('fieldset.events label.check').allTextContents()).map((t) => t.trim()).sort()
  expect(offered).toEqual(served)
  await page.getByRole('button', { name: 'Select all events' }).click()
  await c.shoot('webhook-new')
  await page.getByLabel('Endpoint URL').fill(rx.url('/hook'))
  await page.getByRole('button', { name: 'Create webhook' }).click()
  const secret = await page.getByLabel('Signing secret').inputValue()
  expect(secret).toMatch(/^whsec_/)
  rx.expect('/hook', secret)
  await page.getByRole('link', { name: 'Open the webhook' }).click()
  await page.getByRole('button', { name: 'Send a test' }).click()
  await rx.waitFor((all) => all.some((r) => r.path === '/hook' && r.payload?.type === 'key.created'), 20_000, 'the test delivery')
  await page.getByText('delivered').first().waitFor()
  await page.getByRole('button', { name: 'Disable' }).click()
  await page.getByRole('button', { name: 'Enable' }).waitFor()
  const hooks = (await h.call('GET', '/v1/webhooks', { token: acct.token })).body.data
  expect(hooks[0].is_active).toBe(false)
  expect([...hooks[0].events].sort()).toEqual(served)
  await c.shoot('webhook')
  await page.getByRole('button', { name: 'Edit' }).click()
  await page.getByRole('button', { name: 'Clear all events' }).click()
  await page.getByRole('checkbox', { name: 'key.expired' }).check()
  await page.getByRole('checkbox', { name: 'webhook.deleted' }).check()
  await page.getByRole('button', { name: 'Save' }).click()
  await page.getByRole('form', { name: 'Edit webhook' }).waitFor({ state: 'detached' })
  expect((await h.call('GET', `/v1/webhooks/${hooks[0].id}`, { token: acct.token })).body.events.sort()).toEqual(['key.expired', 'webhook.deleted'])
}, FLOW)

test('API keys: create with a scope (token shown once), rotate, delete', async () => {
  const { page } = c
  await nav('API keys')
  await page.getByRole('button', { name: 'New API key' }).click()
  await page.getByLabel('Name', { exact: true }).fill('desktop app')
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

test('activity: the audit trail with its actor and data, filtered by type, object and day, paged', async () => {
  const { page } = c
  await nav('Activity')
  await page.getByRole('heading', { name: 'Activity' }).waitFor()
  const all = (await h.call('GET', '/v1/events?page_size=25', { token: acct.token })).body
  expect(all.total).toBeGreaterThan(25)
  await page.getByText(`1–25 of ${all.total}`).waitFor()
  expect(await page.locator('.feed-item .chip').allTextContents()).toEqual(all.data.map((e: any) => e.type))
  // Who did it: the account's own API key by name, a device for validate's activations.
  await page.getByText('by API key “Default”').first().waitFor()
  await c.shoot('activity')
  await page.getByRole('button', { name: 'Next' }).click()
  await page.getByText(`26–${Math.min(50, all.total)} of ${all.total}`).waitFor()

  // By type: the one revoke of the keys test, its data (the key object) folded under it.
  await page.getByLabel('Type').selectOption('key.revoked')
  await page.getByText('1–1 of 1').waitFor()
  expect(await page.locator('.feed-item').count()).toBe(1)
  await page.getByText('Data', { exact: true }).click()
  expect(await page.locator('.feed-data pre').textContent()).toContain('"revoke_reason": "refund"')
  await c.shoot('activity-data')

  // "Only this", then any type: every event about that key, newest first, as the API lists them.
  const keyId = JSON.parse((await page.locator('.feed-data pre').textContent())!).id
  await page.getByRole('button', { name: /^Only events about Key / }).click()
  await page.getByRole('button', { name: /^Only events about Key / }).waitFor({ state: 'detached' })
  await page.getByLabel('Type').selectOption('')
  const about = (await h.call('GET', `/v1/events?resource_id=${keyId}`, { token: acct.token })).body
  await page.getByText(`1–${about.total} of ${about.total}`).waitFor()
  expect(await page.getByLabel('About (id)').inputValue()).toBe(keyId)
  await page.getByText('by A device (validate or deactivate)').first().waitFor() // its activation came from a validate
  expect(page.url()).toContain(`resource_id=${keyId}`) // the filter is in the address, to share or reload

  // Since a day to come: nothing yet. Clear: everything again.
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)
  await page.getByLabel('Since (UTC day)').fill(tomorrow)
  await page.getByText('No event matches these filters.').waitFor()
  expect(c.requests.some((u) => u.includes(`since=${tomorrow}T00%3A00%3A00Z`))).toBe(true)
  await page.getByRole('button', { name: 'Clear filters' }).click()
  await page.getByText(`1–25 of ${all.total}`).waitFor()

  // An id longer than any the API knows: its 400 is shown under the field.
  await page.getByLabel('About (id)').fill('x'.repeat(65))
  await page.getByRole('button', { name: 'Filter', exact: true }).click()
  await page.locator('#ev-resource-error').waitFor()
  await c.shoot('activity-error')
  await page.getByRole('button', { name: 'Clear filters' }).click()
  await page.getByText(`1–25 of ${all.total}`).waitFor()
}, FLOW)

test('keyboard: the skip link comes first, then every control of a page can be reached with Tab', async () => {
  const { page } = c
  await nav('Activity')
  await page.reload() // focus starts from the top of the document, as on arrival
  await page.getByRole('heading', { name: 'Activity' }).waitFor()
  await page.keyboard.press('Tab')
  expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content')
  await page.keyboard.press('Enter')
  expect(await page.evaluate(() => document.activeElement?.id)).toBe('main')
  // From the main region, Tab walks the filters in order; Enter on the type list works like a click.
  const reached: string[] = []
  for (let i = 0; i < 10 && !reached.includes('Filter'); i++) {
    await page.keyboard.press('Tab')
    const at = await page.evaluate(() => document.activeElement?.id || document.activeElement?.textContent?.trim() || '')
    if (reached.at(-1) !== at) reached.push(at) // a date input takes a Tab per part (day, month, year)
  }
  expect(reached).toEqual(['ev-type', 'ev-resource', 'ev-since', 'Filter'])
  await page.locator('#ev-type').focus()
  await page.keyboard.press('ArrowDown') // the first type after "All types", in alphabetical order
  await page.waitForFunction(() => (document.getElementById('ev-type') as HTMLSelectElement).value === 'account.plan_changed')
  await page.getByText('No event matches these filters.').waitFor() // only the operator changes a plan
  await page.locator('#ev-type').selectOption('')
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
  // The audit trail needs full_access: a keys:read token is told so.
  const readOnly = await scopedToken(h.call, acct.token, 'keys:read')
  await page.getByRole('button', { name: 'Sign out' }).click()
  await signIn(readOnly)
  await page.getByRole('heading', { name: 'Overview' }).waitFor()
  await nav('Activity')
  await page.getByRole('heading', { name: /needs the full_access scope/ }).waitFor()
  await c.shoot('scope-activity')
}, FLOW)

test('sign-out forgets the token; a revoked token sends the console back to sign-in', async () => {
  const { page } = c
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByLabel('Token').waitFor()
  expect(await page.evaluate(() => JSON.stringify(sessionStorage))).toBe('{}')
  const doomed = await scopedToken(h.call, acct.token, 'full_access')
  await signIn(doomed)
  await page.getByRole('heading', { name: 'Overview' }).waitFor()
  // The overview loads in parts: revoke only once it has, so the click below is what meets the 401.
  await c.settled()
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

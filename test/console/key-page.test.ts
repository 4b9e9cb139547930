// The key page in sections (tabs, each with its address), its one rule for typed dates (UTC, said in
// every date field's hint, whatever the browser's time zone), and the top bar's account name, in a
// real Chromium against a real node. Every change is checked through the API.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { openConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let product: { id: string; name: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth') // named "Test growth" (test/support/harness.ts)
  product = await newProduct(h.call, acct.token, 'tabs')
  await fetch(h.node.url + '/console') // the first request bundles the console
  // Auckland is 12 or 13 hours from UTC: a date read in local time would land on another hour.
  c = await openConsole(h.node.url, { timezoneId: 'Pacific/Auckland' })
  await c.page.goto(h.node.url + '/console')
  await c.page.getByLabel('Token').fill(acct.token)
  await c.page.getByRole('button', { name: 'Sign in' }).click()
  await c.page.getByRole('heading', { name: 'Overview' }).waitFor()
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const api = async (method: string, path: string, body?: unknown) => (await h.call(method, path, { token: acct.token, body })).body

test('the top bar shows the account\'s name, its id in the title', async () => {
  const who = c.page.locator('header .who')
  expect(await who.textContent()).toBe('Test growth')
  expect(await who.locator('.account-name').getAttribute('title')).toBe(`Account ${acct.id}`)
})

test('the key page is four tabs: one shown at a time, each with its address, arrow keys move between them', async () => {
  const { page } = c
  const key = await newKey(h.call, acct.token, product.id)
  await page.goto(`${h.node.url}/console#/keys/${key.id}`)
  const tabs = page.getByRole('tablist', { name: 'Key sections' }).getByRole('tab')
  await tabs.first().waitFor()
  expect(await tabs.allTextContents()).toEqual(['Overview', 'Settings', 'Actions', 'Offline'])
  const selected = async () => (await page.getByRole('tab', { selected: true }).textContent())?.trim()
  // Overview first: about and devices, no forms of the other tabs.
  expect(await selected()).toBe('Overview')
  await page.getByRole('heading', { name: 'About this key' }).waitFor()
  await page.getByRole('heading', { name: /^Devices/ }).waitFor()
  expect(await page.getByRole('heading', { name: 'Settings', exact: true }).count()).toBe(0)
  expect(await page.getByRole('button', { name: 'Revoke key' }).count()).toBe(0)
  await c.settled()
  await c.shoot('key-tab-overview')

  await page.getByRole('tab', { name: 'Settings' }).click()
  await page.getByRole('heading', { name: 'Settings', exact: true }).waitFor()
  expect(page.url()).toEndWith(`#/keys/${key.id}?tab=settings`)
  expect(await page.getByRole('heading', { name: 'About this key' }).count()).toBe(0)
  await c.shoot('key-tab-settings')

  // The keyboard: right arrow to the next tab, End to the last, Home back to the first.
  await page.getByRole('tab', { name: 'Settings' }).focus()
  await page.keyboard.press('ArrowRight')
  await page.getByRole('heading', { name: 'Suspend', exact: true }).waitFor()
  expect(await selected()).toBe('Actions')
  expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Actions')
  await page.keyboard.press('End')
  await page.getByRole('heading', { name: 'Offline license' }).waitFor()
  await page.keyboard.press('Home')
  await page.getByRole('heading', { name: 'About this key' }).waitFor()

  // An address with a tab opens it; an unknown tab opens the first.
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=offline`)
  await page.getByRole('heading', { name: 'Offline license' }).waitFor()
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=nonsense`)
  await page.getByRole('heading', { name: 'About this key' }).waitFor()
  expect(c.errors).toEqual([])
}, FLOW)

test('suspend and extend read what is typed as UTC, and each field says so', async () => {
  const { page } = c
  const key = await newKey(h.call, acct.token, product.id)
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=lifecycle`)
  const untilField = page.getByLabel('Reinstate automatically at (optional, UTC)')
  const expiryField = page.getByLabel('Expires at the end of (UTC)')
  await untilField.waitFor()
  // The same rule in both hints, with the hour now in UTC.
  const rule = 'In UTC, like every date you type on this page.'
  expect(await page.locator('.field:has(#susp-until) .hint').textContent()).toContain(rule)
  expect(await page.locator('.field:has(#extend-date) .hint').textContent()).toContain(rule)
  expect(await page.locator('.field:has(#susp-until) .hint').textContent()).toMatch(/Now: \d\d:\d\d UTC/)
  await c.shoot('key-tab-lifecycle')

  const year = new Date().getUTCFullYear() + 2
  await untilField.fill(`${year}-03-04T10:30`)
  await page.getByRole('button', { name: 'Suspend key' }).click()
  await page.getByRole('button', { name: 'Reinstate key' }).waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).suspended_until).toBe(`${year}-03-04T10:30:00.000Z`)
  // The field shows the stored moment back in UTC, as typed.
  expect(await untilField.inputValue()).toBe(`${year}-03-04T10:30`)

  await expiryField.fill(`${year}-05-06`)
  await page.getByRole('button', { name: 'Save expiry' }).click()
  await page.getByRole('tab', { name: 'Overview' }).click()
  await page.getByText(String(year)).first().waitFor() // the about panel shows the new expiry
  expect((await api('GET', `/v1/keys/${key.id}`)).expires_at).toBe(`${year}-05-06T23:59:59.000Z`)
  expect(c.errors).toEqual([])
}, FLOW)

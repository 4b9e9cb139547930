// Finding a customer's keys in the console, in a real Chromium against a real node: the top bar's one
// search box (e-mail, a part of it, a name, a key's start, an id) opening the keys list filtered by it,
// the customer in the list, and the key page's customer line (edit, remove, a bad address refused).
// Every change is checked through the API.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { signedInConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let keys: { id: string; key_prefix: string }[]

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  const product = await newProduct(h.call, acct.token, 'desk')
  keys = [
    await newKey(h.call, acct.token, product.id, { customer: { email: 'jane.doe@acme.com', name: 'Jane Doe', external_id: 'cus_JANE' } }),
    await newKey(h.call, acct.token, product.id, { customer: { email: 'ops@acme.com' }, plan: 'team' }),
    await newKey(h.call, acct.token, product.id, { customer: { name: 'Björn Ågren' } }),
    await newKey(h.call, acct.token, product.id),
  ]
  c = await signedInConsole(h.node.url, acct.token)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const api = async (method: string, path: string, body?: unknown) => (await h.call(method, path, { token: acct.token, body })).body
const form = () => c.page.getByRole('form', { name: "The key's customer" })
const rows = () => c.page.locator('table.table tbody tr')
const keyLinks = async () => (await rows().locator('td:first-child a').evaluateAll((as) => as.map((a) => a.getAttribute('href'))))

async function search(text: string) {
  const box = c.page.getByRole('search', { name: 'Find license keys' }).getByRole('searchbox')
  await box.fill(text)
  await box.press('Enter')
  await c.page.getByRole('status').filter({ hasText: 'Keys matching' }).waitFor()
  await c.settled()
}

test('the top bar search finds keys by e-mail, a part of it, a name, a key start and an id', async () => {
  const { page } = c
  await search('ACME.com')
  expect(page.url()).toContain('#/keys?q=ACME.com')
  expect((await keyLinks()).sort()).toEqual([`#/keys/${keys[0]!.id}`, `#/keys/${keys[1]!.id}`].sort())
  // the customer is in the list: the name with the e-mail under it, or the e-mail alone
  await rows().filter({ hasText: 'Jane Doe' }).getByText('jane.doe@acme.com').waitFor()
  await rows().filter({ hasText: 'ops@acme.com' }).waitFor()
  await c.shoot('keys-search')

  await search('ågren')
  expect(await keyLinks()).toEqual([`#/keys/${keys[2]!.id}`])
  await search('cus_JANE')
  expect(await keyLinks()).toEqual([`#/keys/${keys[0]!.id}`])
  await search(keys[3]!.id)
  expect(await keyLinks()).toEqual([`#/keys/${keys[3]!.id}`])
  await search(keys[3]!.key_prefix.toLowerCase())
  expect(await keyLinks()).toContain(`#/keys/${keys[3]!.id}`)
  await search('nobody@nowhere.example')
  await page.getByText('No key matches “nobody@nowhere.example”.').waitFor()
  // the search combines with the list's filters
  await search('acme')
  await page.getByLabel('Status').selectOption('revoked')
  await page.getByText('No key matches “acme” among these filters.').waitFor()
  await page.getByLabel('Status').selectOption('')
  // clearing it shows every key again
  await page.getByRole('link', { name: 'Clear the search' }).click()
  await page.waitForFunction(() => location.hash === '#/keys')
  await c.settled()
  expect(await rows().count()).toBe(4)
  expect(await page.getByRole('search', { name: 'Find license keys' }).getByRole('searchbox').inputValue()).toBe('')
  expect(c.errors).toEqual([])
})

test('the key page: the customer line, each part a search; edit, a bad address refused, remove', async () => {
  const { page } = c
  const k = keys[0]!
  await page.goto(`${h.node.url}/console#/keys/${k.id}`)
  const about = page.getByRole('region', { name: 'About this key' })
  await about.getByRole('link', { name: 'jane.doe@acme.com' }).waitFor()
  await c.settled()
  await c.shoot('key-customer')

  await about.getByRole('button', { name: 'Edit the customer' }).click()
  await form().getByLabel('E-mail', { exact: true }).fill('not an address')
  await page.getByRole('button', { name: 'Save customer' }).click()
  await page.locator('#cust-email-error').waitFor()
  expect((await api('GET', `/v1/keys/${k.id}`)).customer.email).toBe('jane.doe@acme.com')
  await c.shoot('key-customer-edit')

  await form().getByLabel('E-mail', { exact: true }).fill('Jane@NewCo.example')
  await form().getByLabel('Name', { exact: true }).fill('Jane Doe-Smith')
  await page.getByRole('button', { name: 'Save customer' }).click()
  await about.getByRole('link', { name: 'jane@newco.example' }).waitFor()
  expect((await api('GET', `/v1/keys/${k.id}`)).customer).toEqual({ email: 'jane@newco.example', name: 'Jane Doe-Smith', external_id: 'cus_JANE' })

  // a part of the line is a search for that customer's keys
  await about.getByRole('link', { name: 'cus_JANE' }).click()
  await page.getByRole('status').filter({ hasText: 'Keys matching' }).waitFor()
  await c.settled()
  expect(await keyLinks()).toEqual([`#/keys/${k.id}`])

  await page.goto(`${h.node.url}/console#/keys/${k.id}`)
  await about.getByRole('button', { name: 'Edit the customer' }).click()
  await page.getByRole('button', { name: 'Remove customer' }).click()
  await about.getByText('Not recorded').waitFor()
  expect((await api('GET', `/v1/keys/${k.id}`)).customer).toBeNull()
  // the one 400 is the refused address above
  expect(c.errors.filter((e) => !e.includes('status of 400'))).toEqual([])
})

// Operator mode: the node's ADMIN_TOKEN signs in to the back office: create an account (its first
// token shown once), open it, change its plan. Listing accounts and issuing API keys for one use
// routes of API-2 §9 that this node may not have yet: the page says so instead of failing.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness'
import { openConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console

beforeAll(async () => {
  h = await startHarness()
  await fetch(h.node.url + '/console') // the first request bundles the console
  c = await openConsole(h.node.url)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

test('the operator token signs in to operator mode: create an account, open it, change its plan', async () => {
  const { page } = c
  await page.goto(h.node.url + '/console')
  await page.getByLabel('Token').fill(ADMIN_TOKEN)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { name: 'Accounts' }).waitFor()
  await page.getByText('Operator', { exact: true }).waitFor()
  expect(await page.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents()).toEqual(['Accounts'])

  await page.getByRole('button', { name: 'New account' }).click()
  await page.getByLabel('Name').first().fill('Acme Tools')
  await page.getByLabel('Plan', { exact: true }).selectOption('hobby')
  await page.getByRole('button', { name: 'Create account' }).click()
  const token = await page.getByLabel('Its first full_access API token').inputValue()
  const ping = await h.call('GET', '/v1/ping', { token })
  expect(ping.status).toBe(200)
  const accountId = ping.body.accountId
  await c.shoot('operator-created')

  await page.getByRole('link', { name: 'Open the account' }).click()
  await page.getByRole('heading', { name: 'Acme Tools' }).waitFor()
  await page.getByText(accountId).waitFor()
  await page.getByLabel('Plan', { exact: true }).selectOption('growth')
  await page.getByRole('button', { name: 'Change plan' }).click()
  await page.getByText('The plan is now growth.').waitFor()
  const account = await h.call('GET', `/admin/accounts/${accountId}`, { token: ADMIN_TOKEN })
  expect(account.body.plan).toBe('growth')
  await c.shoot('operator-account')
}, FLOW)

test('an account id typed in the search opens that account', async () => {
  const { page } = c
  const created = await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Globex', plan: 'free' } })
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Accounts' }).click()
  await page.getByLabel('Name or account id').fill(created.body.account.id)
  await page.getByRole('button', { name: 'Search' }).click()
  await page.getByRole('heading', { name: 'Globex' }).waitFor()
  await c.shoot('operator-accounts')
}, FLOW)

test('operator errors are shown in place; sign-out forgets the operator token', async () => {
  const { page } = c
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Accounts' }).click()
  await page.getByRole('button', { name: 'New account' }).click()
  // The browser's own maxlength is lifted so the API's rule (1..200 characters) answers, next to the field.
  await page.getByLabel('Name').first().evaluate((el) => el.removeAttribute('maxlength'))
  await page.getByLabel('Name').first().fill('x'.repeat(201))
  await page.getByRole('button', { name: 'Create account' }).click()
  await page.locator('#acct-name-error').waitFor()
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByLabel('Token').waitFor()
  expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
  const origin = new URL(h.node.url).origin
  expect(c.requests.filter((u) => new URL(u).origin !== origin)).toEqual([])
}, FLOW)

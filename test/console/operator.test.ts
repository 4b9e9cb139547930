// Operator mode: the node's ADMIN_TOKEN signs in to the back office: create an account (its first
// token shown once), open it, change its plan, list and search the accounts (GET /admin/accounts?q=),
// issue an API key for one (POST /admin/accounts/:id/api-keys, the token shown once).
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

test('the accounts list, newest first; a search by name prefix; an account id typed in the search opens that account', async () => {
  const { page } = c
  const created = await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Globex', plan: 'free' } })
  await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Initech', plan: 'starter' } })
  await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Global Dynamics', plan: 'growth' } })
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Accounts' }).click()
  const listed = (await h.call('GET', '/admin/accounts?page_size=20', { token: ADMIN_TOKEN })).body
  expect(listed.total).toBeGreaterThanOrEqual(4)
  await page.getByText(`${listed.total} accounts`).waitFor()
  const names = async () => (await page.locator('tbody tr td:first-child a').allTextContents()).map((t) => t.trim())
  expect(await names()).toEqual(listed.data.map((a: any) => a.name))
  expect((await names()).slice(0, 3)).toEqual(['Global Dynamics', 'Initech', 'Globex']) // newest first
  await c.shoot('operator-accounts')

  // A name prefix, any case: the API's q.
  await page.getByLabel('Name or account id').fill('glo')
  await page.getByRole('button', { name: 'Search' }).click()
  await page.getByText('2 accounts').waitFor()
  expect(await names()).toEqual(['Global Dynamics', 'Globex'])
  expect(c.requests.some((u) => u.includes('/admin/accounts?q=glo'))).toBe(true)
  await c.shoot('operator-search')
  await page.getByLabel('Name or account id').fill('no such company')
  await page.getByRole('button', { name: 'Search' }).click()
  await page.getByText('No account matches.').waitFor()

  await page.getByLabel('Name or account id').fill(created.body.account.id)
  await page.getByRole('button', { name: 'Search' }).click()
  await page.getByRole('heading', { name: 'Globex' }).waitFor()
}, FLOW)

test('issue an API key for an account: the token is shown once, works, has its scope, and the account trail names the operator', async () => {
  const { page } = c
  const created = await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Umbrella', plan: 'growth' } })
  const { account, api_key } = created.body
  await page.goto(`${h.node.url}/console#/accounts/${account.id}`)
  await page.getByRole('heading', { name: 'Umbrella' }).waitFor()
  await page.getByRole('button', { name: 'Issue an API key' }).click()
  // The API's own refusal first: an empty name is explained under the field.
  await page.getByLabel('Name').evaluate((el) => el.removeAttribute('required'))
  await page.getByRole('button', { name: 'Create API key' }).click()
  await page.locator('#ak-name-error').waitFor()
  await page.getByLabel('Name').fill('support recovery')
  await page.getByLabel('Scope').selectOption('keys:read')
  await page.getByRole('button', { name: 'Create API key' }).click()
  const token = await page.getByLabel('API token for this account').inputValue()
  expect(token).toMatch(/^kw_/)
  const ping = await h.call('GET', '/v1/ping', { token })
  expect(ping.status).toBe(200)
  expect(ping.body.accountId).toBe(account.id)
  expect((await h.call('GET', '/v1/keys', { token })).status).toBe(200)
  expect((await h.call('POST', '/v1/products', { token, body: { name: 'x', slug: 'x' } })).status).toBe(403)
  const keys = (await h.call('GET', '/v1/api-keys', { token: api_key.token })).body.data
  expect(keys.map((k: any) => [k.name, k.scope]).sort()).toEqual([['Default', 'full_access'], ['support recovery', 'keys:read']])
  const trail = (await h.call('GET', '/v1/events?type=api_key.created', { token: api_key.token })).body.data
  expect(trail.find((e: any) => e.data.name === 'support recovery')?.actor).toEqual({ type: 'operator', id: null })
  // The account page's usage counts the new key at once.
  const apiKeys = page.locator('.props > div', { has: page.locator('dt', { hasText: /^API keys$/ }) }).locator('dd')
  await page.waitForFunction(() => [...document.querySelectorAll('.props dt')].find((dt) => dt.textContent === 'API keys')?.nextElementSibling?.textContent === '2')
  expect(await apiKeys.textContent()).toBe('2')
  await c.shoot('operator-api-key')
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

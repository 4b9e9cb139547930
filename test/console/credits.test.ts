// Metered keys in the console, in a real Chromium against a real node: a key's credits (balance, refill
// rule, next refill, add / subtract / set, the rule's edit, credits consumed per day), a policy's credits,
// and the overview's credits chart beside validations by outcome. Every change is checked through the API.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { signedInConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let product: { id: string; name: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  product = await newProduct(h.call, acct.token, 'meter')
  c = await signedInConsole(h.node.url, acct.token)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const api = async (method: string, path: string, body?: unknown) => (await h.call(method, path, { token: acct.token, body })).body

test('a metered key: its balance, refill rule and next refill; add, subtract and set; the usage chart', async () => {
  const { page } = c
  const key = await newKey(h.call, acct.token, product.id, { credits: { remaining: 500, refill: { amount: 500, interval: 'month', day_of_month: 31 } } })
  const device = 'ab'.repeat(32)
  for (let i = 0; i < 3; i++) expect((await api('POST', '/v1/validate', { key: key.key_value, device_fingerprint: device, cost: 10 })).valid).toBe(true)
  await h.node.deps.validation.credits.flush()
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=settings`)
  const panel = page.getByRole('region', { name: 'Credits' })
  await panel.getByText('Topped up to 500 every month on the 31st').waitFor()
  await panel.getByText('Next:').waitFor()
  await panel.getByText('470', { exact: true }).waitFor()
  await c.settled()
  await c.shoot('key-credits')

  await page.getByLabel('Change', { exact: true }).selectOption('add')
  await page.getByLabel('Amount (credits)').fill('30')
  await page.getByRole('button', { name: 'Add credits' }).click()
  await panel.getByText('Balance now 500, on every node.').waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).credits.remaining).toBe(500)

  await page.getByLabel('Change', { exact: true }).selectOption('subtract')
  await page.getByLabel('Amount (credits)').fill('0')
  await page.getByRole('button', { name: 'Subtract credits' }).click()
  await page.locator('#cr-amount-error').waitFor() // at least 1: said by the browser, nothing sent
  await page.getByLabel('Amount (credits)').fill('600')
  await page.getByRole('button', { name: 'Subtract credits' }).click()
  await panel.getByText('Balance now 0, on every node.').waitFor()

  await page.getByLabel('Change', { exact: true }).selectOption('set')
  await page.getByLabel('Amount (credits)').fill('42')
  await page.getByRole('button', { name: 'Set balance' }).click()
  await panel.getByText('Balance now 42, on every node.').waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).credits.remaining).toBe(42)
  expect((await api('GET', `/v1/analytics/credits?key_id=${key.id}&range=7d`)).at(-1).consumed).toBe(30)
  expect(c.errors).toEqual([])
})

test('an unmetered key is made metered with a daily top-up, then unmetered again', async () => {
  const { page } = c
  const key = await newKey(h.call, acct.token, product.id)
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=settings`)
  await page.getByRole('heading', { name: 'Make this key metered' }).waitFor()
  await page.getByLabel('Balance', { exact: true }).fill('100')
  await page.getByLabel('Refill', { exact: true }).selectOption('day')
  await page.getByLabel('Refill amount').fill('100')
  await page.getByRole('button', { name: 'Make metered' }).click()
  await page.getByText('Topped up to 100 every day (00:00 UTC)').first().waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).credits).toMatchObject({ remaining: 100, refill: { amount: 100, interval: 'day', mode: 'top_up' } })
  await page.getByRole('button', { name: 'Make unmetered' }).click()
  await page.getByRole('heading', { name: 'Make this key metered' }).waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).credits).toBeNull()
  expect(c.errors).toEqual([])
})

test('a policy\'s credits: what keys created from it afterwards start with; the overview charts credits consumed', async () => {
  const { page } = c
  const policy = await api('POST', '/v1/policies', { product_id: product.id, name: 'Metered monthly' })
  await page.goto(`${h.node.url}/console#/policies/${policy.id}`)
  const form = page.getByRole('form', { name: 'Credits' })
  await form.getByText('Keys of this policy are unmetered.').waitFor()
  await form.getByLabel('Metered keys').check()
  await form.getByLabel('Credits a new key starts with').fill('1000')
  await form.getByLabel('Refill', { exact: true }).selectOption('month')
  await form.getByLabel('Refill amount').fill('250')
  await form.getByLabel('How').selectOption('add')
  await form.getByLabel('Day of the month').fill('15')
  await form.getByRole('button', { name: 'Save credits' }).click()
  await form.getByText('Saved: keys created from now on get these credits.').waitFor()
  expect((await api('GET', `/v1/policies/${policy.id}`)).credits).toEqual({ initial: 1000, refill: { amount: 250, interval: 'month', day_of_month: 15, mode: 'add' } })
  await form.getByText('Each new key starts with 1,000 credits. 250 added every month on the 15th').waitFor()
  await c.settled()
  await c.shoot('policy-credits')
  expect((await api('POST', '/v1/keys', { policy_id: policy.id })).credits.remaining).toBe(1000)

  await page.goto(`${h.node.url}/console#/`)
  await page.getByRole('heading', { name: 'Credits consumed per day' }).waitFor()
  await page.getByText(/30 credits consumed in 30 days/).waitFor()
  await c.settled()
  await c.shoot('overview-credits')
  expect(c.errors).toEqual([])
})

test('a new policy made metered in its creation form: its keys start with the credits and refill', async () => {
  const { page } = c
  await page.goto(`${h.node.url}/console#/policies`)
  await page.getByRole('button', { name: 'New policy' }).click()
  await page.getByLabel('Name', { exact: true }).fill('Metered daily')
  await page.getByLabel('Metered keys').check()
  await page.getByLabel('Credits a new key starts with').fill('-5')
  await page.getByRole('button', { name: 'Create policy' }).click()
  // the browser's own check, under its field; nothing was created
  await page.locator('#new-pol-credits-initial-error').waitFor()
  await c.shoot('policy-new-credits')
  expect((await api('GET', `/v1/policies?product_id=${product.id}`)).data.map((p: { name: string }) => p.name)).not.toContain('Metered daily')
  await page.getByLabel('Credits a new key starts with').fill('500')
  await page.getByLabel('Refill', { exact: true }).selectOption('day')
  await page.getByLabel('Refill amount').fill('500')
  await page.getByRole('button', { name: 'Create policy' }).click()
  await page.getByRole('heading', { name: 'Metered daily' }).waitFor()
  const id = page.url().split('/').pop()!
  expect((await api('GET', `/v1/policies/${id}`)).credits).toEqual({ initial: 500, refill: { amount: 500, interval: 'day', day_of_month: null, mode: 'top_up' } })
  await page.getByRole('form', { name: 'Credits' }).getByText('Each new key starts with 500 credits. Topped up to 500 every day').waitFor()
  expect((await api('POST', '/v1/keys', { policy_id: id })).credits).toMatchObject({ remaining: 500, refill: { amount: 500, interval: 'day' } })
  expect(c.errors.filter((e) => !/status of 4\d\d/.test(e))).toEqual([])
})

// The console's address is input: an id read from the hash (`#/keys/<id>`) is checked against the id
// shape before any API call, and every segment the console puts into an API path is encoded, so
// `#/keys/..%2Fapi-keys` cannot turn into a request for `/v1/api-keys`.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness'
import { openConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  await fetch(h.node.url + '/console') // the first request bundles the console
  c = await openConsole(h.node.url)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

async function signIn(token: string, heading: string) {
  await c.page.goto(h.node.url + '/console')
  await c.page.getByLabel('Token').fill(token)
  await c.page.getByRole('button', { name: 'Sign in' }).click()
  await c.page.getByRole('heading', { name: heading }).waitFor()
}

/** What the page logged as errors, without the browser's own line for each 4xx answer (expected here). */
const pageErrors = () => c.errors.filter((e) => !e.startsWith('Failed to load resource'))

/** Opens `hash` and returns the API paths the page requested meanwhile. */
async function open(hash: string): Promise<string[]> {
  const from = c.requests.length
  await c.page.goto(h.node.url + '/console' + hash)
  await c.page.locator('main h1').waitFor()
  await c.page.waitForTimeout(500) // a request the page would make after rendering would show by now
  return c.requests.slice(from).map((u) => new URL(u).pathname).filter((p) => !p.startsWith('/console'))
}

test('an id in the address that is not an id is "not found" in the page, and no API path is built from it', async () => {
  await signIn(acct.token, 'Overview')
  const { page } = c
  for (const [hash, api] of [
    ['#/keys/..%2Fapi-keys', '/v1/api-keys'],
    ['#/keys/%2E%2E', '/v1/'],
    ['#/webhooks/..%2F..%2Fv1%2Fkeys', '/v1/keys'],
    ['#/keys/key_%E0%A4%A', null], // not even decodable
    ['#/keys/prod_01JD7Z3X9K8Q4W2E6R5T1Y0V3J', null], // a well-formed id of another kind
  ] as const) {
    const requested = await open(hash)
    expect(requested.filter((p) => p === api || p.startsWith('/v1/keys/') || p.startsWith('/v1/webhooks/'))).toEqual([])
    await page.getByRole('heading', { name: 'Not found' }).waitFor()
    expect(await page.getByRole('alert').textContent()).toMatch(/is not (a license key|a webhook) id/)
    await page.getByRole('link', { name: /All (license keys|webhooks)/ }).waitFor()
    if (api === '/v1/api-keys') await c.shoot('route-not-found')
  }
  // A well-formed id that does not exist is asked for (encoded) and the API's 404 is shown.
  const asked = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/keys/key_01JD7Z3X9K8Q4W2E6R5T1Y0V3J')
  await page.goto(h.node.url + '/console#/keys/key_01JD7Z3X9K8Q4W2E6R5T1Y0V3J')
  expect((await asked).status()).toBe(404)
  await page.getByRole('heading', { name: 'License key' }).waitFor()
  expect(await page.getByRole('alert').textContent()).toContain('No key with id key_01JD7Z3X9K8Q4W2E6R5T1Y0V3J')
  expect(pageErrors()).toEqual([])
}, FLOW)

test('operator mode checks account ids the same way', async () => {
  await c.page.evaluate(() => sessionStorage.clear())
  await signIn(ADMIN_TOKEN, 'Accounts')
  const requested = await open('#/accounts/..%2F..%2Fv1%2Fping')
  expect(requested.filter((p) => p.startsWith('/admin/accounts/') || p === '/v1/ping')).toEqual([])
  await c.page.getByRole('heading', { name: 'Not found' }).waitFor()
  expect(await c.page.getByRole('alert').textContent()).toContain('is not an account id')
  expect(pageErrors()).toEqual([])
}, FLOW)

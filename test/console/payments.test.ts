// Payment connectors in the console, in a real Chromium against a real node: the guided form (each
// provider's events to enable; the endpoint URL once created), the mail-off notice of the embedded
// default, and the connector's page with the events received (processed, unmapped, bad signature) and
// the keys they issued. Every change is checked through the API.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type Stripe from 'stripe'
import { newProduct, startHarness, type Harness } from '../support/harness'
import { deliver, newPolicy, stripeEvent, stripeHeaders } from '../connectors/helpers'
import { signedInConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let policy: { id: string; name: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  const product = await newProduct(h.call, acct.token, 'studio')
  policy = await newPolicy(h, acct.token, product.id, { name: 'Studio Pro' })
  c = await signedInConsole(h.node.url, acct.token)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const api = async (method: string, path: string, body?: unknown) => (await h.call(method, path, { token: acct.token, body })).body
const nav = (name: string) => c.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name }).click()

function checkout(price: string) {
  const session: Partial<Stripe.Checkout.Session> = {
    id: `cs_${Math.random().toString(36).slice(2, 12)}`,
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    customer_details: { email: 'buyer@example.com' } as Stripe.Checkout.Session.CustomerDetails,
    metadata: { keyward_price: price },
  }
  return JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
}

test('create a connector with the guided form, then see the events it received and the keys they issued', async () => {
  const { page } = c
  await nav('Payments')
  await page.getByText('No connector yet.').waitFor()
  await page.getByText('Mail is off on this server').waitFor()
  await page.getByRole('button', { name: 'New connector' }).click()
  // each provider's own instructions
  await page.getByLabel('Paddle').check()
  await page.getByText('transaction.completed').waitFor()
  await page.getByLabel('Lemon Squeezy').check()
  await page.getByText('subscription_payment_refunded').waitFor()
  await page.getByLabel('Stripe').check()
  await page.getByText('invoice.paid', { exact: true }).waitFor()
  await c.settled()
  await c.shoot('payments-new')

  await page.getByLabel('Name', { exact: true }).fill('Stripe live')
  await page.getByLabel('Signing secret').fill('whsec_console_test')
  await page.getByLabel('Price 1', { exact: true }).fill('price_console')
  await page.getByLabel('Policy for price 1').selectOption(policy.id)
  await page.getByRole('button', { name: 'Create connector' }).click()
  await page.getByRole('heading', { name: 'Stripe live' }).waitFor()

  const [connector] = (await api('GET', '/v1/connectors')).data
  expect(connector).toMatchObject({ provider: 'stripe', name: 'Stripe live', mappings: [{ price: 'price_console', policy_id: policy.id }], email_keys: true })
  expect(await page.getByTestId('endpoint-url').textContent()).toBe(`${h.node.url}/hooks/${connector.id}`)

  // the provider sends a purchase, an unmapped price and a forged event
  const ok = checkout('price_console')
  expect((await deliver(h, connector.endpoint_path, ok, stripeHeaders(ok, { secret: 'whsec_console_test' }))).body.outcome).toBe('processed')
  const other = checkout('price_unknown')
  expect((await deliver(h, connector.endpoint_path, other, stripeHeaders(other, { secret: 'whsec_console_test' }))).body.outcome).toBe('unmapped')
  expect((await deliver(h, connector.endpoint_path, ok, stripeHeaders(ok, { secret: 'whsec_forged' }))).status).toBe(400)

  await page.getByRole('button', { name: 'Refresh' }).click()
  await page.getByRole('cell', { name: 'bad_signature' }).waitFor()
  await page.getByRole('cell', { name: 'unmapped' }).waitFor()
  await page.getByRole('cell', { name: 'processed' }).waitFor()
  const [key] = (await api('GET', '/v1/keys')).data
  await page.getByRole('link', { name: key.id }).waitFor()
  await page.getByText('Mail is off on this server (no SMTP_URL).').waitFor()
  await c.settled()
  await c.shoot('payments-connector')

  // the key's page is one click away
  await page.getByRole('link', { name: key.id }).click()
  await page.getByText(key.id).first().waitFor()
  expect(c.errors).toEqual([])
}, FLOW)

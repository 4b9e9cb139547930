// The buyer's address a connector reads from a payment must be one valid address, or no mail is
// queued: no list, no CR/LF (header injection), no display name or angle brackets. The key is issued
// all the same, and the event's detail (the connector page) says why nothing was mailed.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { SMTPServer } from 'smtp-server'
import type Stripe from 'stripe'
import { startHarness, type Harness } from '../support/harness'
import { freePort } from '../support/ports'
import { connectorSetup, deliver, paddleHeaders, stripeEvent, stripeHeaders } from './helpers'

setDefaultTimeout(60_000)

const smtpPort = freePort()
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, _session, callback) {
    stream.resume()
    stream.on('end', () => callback())
  },
})

let h: Harness
beforeAll(async () => {
  await new Promise<void>((resolve) => smtp.listen(smtpPort, '127.0.0.1', resolve))
  h = await startHarness({ SMTP_URL: `smtp://127.0.0.1:${smtpPort}`, MAIL_FROM: 'licenses@acme.example' }, { socket: false })
}, 180_000)
afterAll(async () => {
  await h?.close()
  await new Promise<void>((resolve) => smtp.close(resolve))
})

const BAD = [
  'a@example.com, b@example.com',
  'a@example.com;b@example.com',
  'a@example.com\r\nBcc: victim@example.net',
  'a@example.com\nBcc: victim@example.net',
  '"Alice" <alice@example.com>',
  'Alice <alice@example.com>',
  'alice@example.com <thief@example.net>',
  '<alice@example.com>',
  ' alice@example.com',
  'alice@example.com ',
  'alice@',
  '@example.com',
  'no-at-sign',
  'alice@@example.com',
  'alice@exa mple.com',
  'alice@-example.com',
  `${'a'.repeat(65)}@example.com`,
  `a@${'b'.repeat(250)}.com`,
  'a\u0007@example.com',
]
const GOOD = ['alice@example.com', 'first.last+tag@mail.example.co.uk', "o'brien@example.ie", 'a@localhost']

function checkout(email: string) {
  const session: Partial<Stripe.Checkout.Session> = {
    id: `cs_${Math.random().toString(36).slice(2, 12)}`,
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    payment_intent: `pi_${Math.random().toString(36).slice(2, 12)}`,
    customer_details: { email } as Stripe.Checkout.Session.CustomerDetails,
    metadata: { keyward_price: 'price_a' },
  }
  return JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
}

const counts = async (accountId: string) =>
  (await h.node.deps.sql<{ keys: number; mails: number }[]>`select
    (select count(*)::int from license_keys where account_id = ${accountId}) as keys,
    (select count(*)::int from connector_mails where account_id = ${accountId}) as mails`)[0]!

test('Stripe: a buyer email that is not one valid address issues the key, queues no mail, and says why', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'], { email_keys: true })
  for (const email of BAD) {
    const payload = checkout(email)
    const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
    expect({ email, status: res.status, outcome: res.body.outcome }).toEqual({ email, status: 200, outcome: 'processed' })
    expect(res.body.detail).toContain('not one valid address')
    expect(res.body.detail).not.toContain('emailed')
  }
  expect(await counts(s.id)).toEqual({ keys: BAD.length, mails: 0 })
  const [meta] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${s.id} and metadata ? 'customer_email'`
  expect(meta!.n).toBe(0)
  for (const email of GOOD) {
    const payload = checkout(email)
    const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
    expect(res.body.detail).toContain(`emailed to ${email}`)
  }
  expect(await counts(s.id)).toEqual({ keys: BAD.length + GOOD.length, mails: GOOD.length })
})

test('Paddle: the same rule for custom_data.email', async () => {
  const s = await connectorSetup(h, 'paddle', ['price_a'], { email_keys: true })
  for (const email of ['a@example.com, b@example.com', 'x@example.com\r\nBcc: y@example.net', 'fine@example.com']) {
    const id = `txn_${Math.random().toString(36).slice(2, 12)}`
    const payload = JSON.stringify({
      event_id: `evt_${id}`,
      event_type: 'transaction.completed',
      data: { id, status: 'completed', subscription_id: null, custom_data: { email }, items: [{ price: { id: 'price_a' }, quantity: 1 }] },
    })
    const res = await deliver(h, s.connector.endpoint_path, payload, paddleHeaders(payload))
    expect(res.body.outcome).toBe('processed')
    expect(res.body.detail).toContain(email === 'fine@example.com' ? 'emailed to fine@example.com' : 'not one valid address')
  }
  expect(await counts(s.id)).toEqual({ keys: 3, mails: 1 })
})

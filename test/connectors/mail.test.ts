// Key delivery by email, against a real SMTP server in this process (smtp-server), its mail read
// with mailparser: the buyer gets the key value with the product and policy names; the value is kept
// sealed only until the server accepts the mail, then erased; an SMTP outage is retried with backoff
// and loses nothing; the value is in no event and no attempt; the template can be replaced.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import type Stripe from 'stripe'
import { DEFAULT_TEMPLATE, render } from '../../src/modules/connectors/mailer'
import { startHarness, type Harness } from '../support/harness'
import { KEY_VALUE } from '../support/helpers'
import { freePort } from '../support/ports'
import { waitUntil } from '../support/wait'
import { connectorSetup, deliver, stripeEvent, stripeHeaders } from './helpers'

setDefaultTimeout(60_000)

const received: ParsedMail[] = []
let down = false
const smtpPort = freePort()
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, _session, callback) {
    if (down) {
      stream.resume()
      stream.on('end', () => callback(Object.assign(new Error('Mailbox temporarily unavailable'), { responseCode: 451 })))
      return
    }
    simpleParser(stream)
      .then((mail) => {
        received.push(mail)
        callback()
      })
      .catch(callback)
  },
})

let h: Harness
beforeAll(async () => {
  await new Promise<void>((resolve) => smtp.listen(smtpPort, '127.0.0.1', resolve))
  h = await startHarness(
    { SMTP_URL: `smtp://127.0.0.1:${smtpPort}`, MAIL_FROM: 'Acme Licensing <licenses@acme.example>', MAIL_RETRY_DELAYS_MS: '100,100,100,100,100,100,100,100' },
    { socket: false },
  )
}, 180_000)
afterAll(async () => {
  await h?.close()
  await new Promise<void>((resolve) => smtp.close(resolve))
})

async function buy(s: Awaited<ReturnType<typeof connectorSetup>>, email: string) {
  const session: Partial<Stripe.Checkout.Session> = {
    id: `cs_${Math.random().toString(36).slice(2, 12)}`,
    object: 'checkout.session',
    mode: 'payment',
    payment_status: 'paid',
    payment_intent: `pi_${Math.random().toString(36).slice(2, 12)}`,
    customer_details: { email } as Stripe.Checkout.Session.CustomerDetails,
    metadata: { keyward_price: 'price_a' },
  }
  const payload = JSON.stringify(stripeEvent('checkout.session.completed', session as Record<string, unknown>))
  const res = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))
  expect(res.body.outcome).toBe('processed')
  expect(res.body.detail).toContain(`emailed to ${email}`)
}

const mailRows = async (connectorId: string) => [
  ...(await h.node.deps.sql<{ status: string; value_sealed: string | null; attempts: number; last_error: string | null }[]>`
    select status, value_sealed, attempts, last_error from connector_mails where connector_id = ${connectorId}`),
]

describe('key emails', () => {
  test('the buyer gets the key with product and policy names; the sealed value is erased once accepted; never in events', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'], { email_keys: true })
    await buy(s, 'alice@example.com')
    await waitUntil(() => received.some((m) => m.to && JSON.stringify(m.to).includes('alice@example.com')), 20_000)
    const mail = received.find((m) => JSON.stringify(m.to).includes('alice@example.com'))!
    expect(mail.from?.text).toContain('licenses@acme.example')
    expect(mail.subject).toBe(`Your license key for ${s.product.name}`)
    const value = mail.text!.match(/([0-9A-HJKMNP-TV-Z]{5}-){4}[0-9A-HJKMNP-TV-Z]{5}/)![0]
    expect(value).toMatch(KEY_VALUE)
    expect(mail.text).toContain(`${s.product.name} (Policy price_a)`)

    // the mailed value is the key's: it validates
    const valid = await h.call('POST', '/v1/validate', { token: s.token, body: { key: value, device_fingerprint: 'ab'.repeat(32) } })
    expect(valid.body.valid).toBe(true)

    await waitUntil(async () => (await mailRows(s.connector.id))[0]?.status === 'sent')
    expect(await mailRows(s.connector.id)).toEqual([{ status: 'sent', value_sealed: null, attempts: 1, last_error: null }])
    const detail = (await h.call('GET', `/v1/connectors/${s.connector.id}`, { token: s.token })).body
    expect(detail.mail_enabled).toBe(true)
    expect(detail.emails).toEqual([expect.objectContaining({ to: 'alice@example.com', status: 'sent', attempts: 1, next_attempt_at: null })])
    const everything = await h.node.deps.sql`select data::text as d from events where account_id = ${s.id}`
    for (const row of everything) expect(String(row.d)).not.toContain(value)
    expect(JSON.stringify(detail)).not.toContain(value)
  })

  test('an SMTP outage: retried with backoff, the value kept sealed meanwhile; the mail arrives once when the server is back', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'], { email_keys: true })
    down = true
    try {
      await buy(s, 'bob@example.com')
      await waitUntil(async () => ((await mailRows(s.connector.id))[0]?.attempts ?? 0) >= 2, 30_000)
      const [pending] = await mailRows(s.connector.id)
      expect(pending!.status).toBe('pending')
      expect(pending!.value_sealed).not.toBeNull()
      expect(pending!.last_error).toContain('451')
    } finally {
      down = false
    }
    await waitUntil(async () => (await mailRows(s.connector.id))[0]?.status === 'sent', 30_000)
    expect((await mailRows(s.connector.id))[0]!.value_sealed).toBeNull()
    expect(received.filter((m) => JSON.stringify(m.to).includes('bob@example.com'))).toHaveLength(1)
  })
})

test('a vendor template replaces the built-in one: first line the subject, placeholders filled', () => {
  const custom = 'Subject: {{product}} licence\n\nDear customer,\nyour key: {{key}} for {{policy}}, sent to {{to}}.{{expiry}}'
  const fields = { key: 'AAAAA-BBBBB', product: 'App', policy: 'Pro', expiry: '', to: 'x@example.com' }
  expect(render(custom, fields)).toEqual({ subject: 'App licence', text: 'Dear customer,\nyour key: AAAAA-BBBBB for Pro, sent to x@example.com.' })
  const built = render(DEFAULT_TEMPLATE, fields)
  expect(built.subject).toBe('Your license key for App')
  expect(built.text).toContain('    AAAAA-BBBBB\n')
  expect(built.text).not.toContain('{{')
})

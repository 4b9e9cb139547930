// A slow SMTP server (one that takes longer than the mail's claim over its final answer, as RFC 5321
// allows) must not get a key mailed twice: the node sending renews its claim while it waits, so another
// node never takes the mail meanwhile. Two mailers (two nodes) share the database; the claim is short
// here so the server's delay outlasts it several times over.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { SMTPServer } from 'smtp-server'
import { newId, seal } from '../../src/infra/crypto'
import { Mailer } from '../../src/modules/connectors/mailer'
import { newKey, startHarness, type Harness } from '../support/harness'
import { freePort } from '../support/ports'
import { waitUntil } from '../support/wait'
import { connectorSetup } from './helpers'

setDefaultTimeout(60_000)

const CLAIM_MS = 600
const smtpPort = freePort()
let delivered = 0
let hold: Promise<void> | null = null
let release = () => {}
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, _session, callback) {
    stream.resume()
    stream.on('end', () => {
      delivered++
      // the message is in; the answer comes when the test says so
      void (hold ?? Promise.resolve()).then(() => callback())
    })
  },
})

let h: Harness
beforeAll(async () => {
  await new Promise<void>((resolve) => smtp.listen(smtpPort, '127.0.0.1', resolve))
  // this node sends no mail itself (no SMTP_URL): only the two mailers below do
  h = await startHarness({}, { socket: false })
}, 180_000)
afterAll(async () => {
  release()
  await h?.close()
  await new Promise<void>((resolve) => smtp.close(resolve))
})

test('a server slower than the claim gets the key once, from one node', async () => {
  const s = await connectorSetup(h, 'stripe', ['price_a'])
  const key = await newKey(h.call, s.token, s.product.id)
  const mailId = newId('mail')
  const deps = h.node.deps
  await deps.sql`insert into connector_mails (id, connector_id, account_id, key_id, to_email, value_sealed)
    values (${mailId}, ${s.connector.id}, ${s.id}, ${key.id}, 'buyer@example.com', ${seal(deps.secretKey, key.key_value)})`
  const withSmtp = { ...deps, config: { ...deps.config, smtpUrl: `smtp://127.0.0.1:${smtpPort}`, mailFrom: 'licenses@acme.example' } }
  const nodes = [new Mailer(withSmtp, CLAIM_MS), new Mailer(withSmtp, CLAIM_MS)]
  hold = new Promise<void>((resolve) => (release = resolve))
  try {
    nodes[0]!.wake()
    await waitUntil(() => delivered === 1, 10_000)
    // the server sits on its answer for several claims' length; the other node keeps looking for due mail
    const until = Date.now() + CLAIM_MS * 5
    while (Date.now() < until) {
      nodes[1]!.wake()
      await Bun.sleep(CLAIM_MS / 4)
    }
    release()
    await waitUntil(async () => (await deps.sql`select 1 from connector_mails where id = ${mailId} and status = 'sent'`).length === 1, 10_000)
  } finally {
    release()
    await Promise.all(nodes.map((m) => m.stop()))
  }
  expect(delivered).toBe(1)
  const [row] = await deps.sql<{ attempts: number; value_sealed: string | null }[]>`select attempts, value_sealed from connector_mails where id = ${mailId}`
  expect(row).toEqual({ attempts: 1, value_sealed: null })
})

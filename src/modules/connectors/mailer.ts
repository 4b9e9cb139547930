// Key delivery by email: an outbox of its own (connector_mails). The key value waits there sealed
// (AES-256-GCM under SECRET_KEY) until the SMTP server accepts the mail, then it is erased. Any node
// claims due mails for a while (`FOR UPDATE SKIP LOCKED`, next_attempt_at pushed past the send claim,
// renewed while the SMTP server answers), so a crash mid-send is retried elsewhere; a failure is retried
// with the configured backoff.
// Neither the value nor the mail's text is ever logged.
import { readFileSync } from 'node:fs'
import nodemailer, { type Transporter } from 'nodemailer'
import { canMail } from '../../config'
import type { Deps } from '../../deps'
import { open } from '../../infra/crypto'

/** The built-in template: the first line is the subject; `{{name}}` placeholders are filled in. */
export const DEFAULT_TEMPLATE = `Subject: Your license key for {{product}}

Hello,

Thank you for your purchase. Here is your license key for {{product}} ({{policy}}):

    {{key}}

Keep it somewhere safe: enter it in the app when it asks for a license key.
{{expiry}}
If you did not make this purchase, reply to this email.
`

const SEND_CLAIM_MS = 5 * 60_000
const BATCH = 10

export interface MailFields {
  key: string
  product: string
  policy: string
  expiry: string
  to: string
}

/** Subject and text from a template (first line `Subject: …`, then a blank line, then the body). */
export function render(template: string, fields: MailFields): { subject: string; text: string } {
  const fill = (s: string) => s.replace(/\{\{\s*(key|product|policy|expiry|to)\s*\}\}/g, (_, name: keyof MailFields) => fields[name])
  const [first, ...rest] = template.split('\n')
  const subject = /^subject:/i.test(first ?? '') ? fill(first!.slice(first!.indexOf(':') + 1).trim()) : `Your license key for ${fields.product}`
  const body = /^subject:/i.test(first ?? '') ? rest.join('\n').replace(/^\n/, '') : template
  return { subject, text: fill(body) }
}

interface Due {
  id: string
  to_email: string
  value_sealed: string | null
  attempts: number
  product: string
  policy: string | null
  expires_at: Date | null
}

export class Mailer {
  private readonly transport: Transporter | null
  private readonly template: string
  private running: Promise<void> | null = null
  private again = false
  private timer: ReturnType<typeof setInterval> | null = null

  constructor(
    private readonly deps: Deps,
    /** How long a claim keeps other nodes off a mail; renewed while the SMTP server answers (see send). */
    private readonly claimMs = SEND_CLAIM_MS,
  ) {
    const { smtpUrl, mailTemplate } = deps.config
    this.transport = canMail(deps.config) ? nodemailer.createTransport(smtpUrl!) : null
    // read once at startup: a missing file fails the start, not a purchase
    this.template = mailTemplate ? readFileSync(mailTemplate, 'utf8') : DEFAULT_TEMPLATE
  }

  get enabled() {
    return this.transport !== null
  }

  start(intervalMs: number) {
    if (this.transport) this.timer = setInterval(() => this.wake(), intervalMs)
  }

  /** Sends what is due now (a new key's mail is due at once); never overlaps itself on a node. */
  wake = () => {
    if (!this.transport) return
    if (this.running) {
      this.again = true
      return
    }
    this.running = this.drain()
      .catch((err) => this.deps.log.warn({ job: 'key-mail', err: String(err) }, 'key mail run failed'))
      .finally(() => {
        this.running = null
        if (this.again) {
          this.again = false
          this.wake()
        }
      })
  }

  async stop() {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    if (this.running) await this.running
    this.transport?.close()
  }

  private async drain() {
    for (;;) {
      const due = await this.claim()
      if (due.length === 0) return
      for (const mail of due) await this.send(mail)
    }
  }

  private async claim(): Promise<Due[]> {
    const sql = this.deps.sql
    return sql<Due[]>`with due as (
        select id from connector_mails where status = 'pending' and next_attempt_at <= now()
        order by next_attempt_at limit ${BATCH} for update skip locked
      ), claimed as (
        update connector_mails m set attempts = m.attempts + 1, next_attempt_at = now() + ${this.claimMs} * interval '1 millisecond'
        from due where m.id = due.id returning m.id, m.to_email, m.value_sealed, m.attempts, m.key_id
      )
      select l.id, l.to_email, l.value_sealed, l.attempts, pr.name as product, po.name as policy, k.expires_at
      from claimed l join license_keys k on k.id = l.key_id join products pr on pr.id = k.product_id
        left join policies po on po.id = k.policy_id`
  }

  private async send(mail: Due) {
    const sql = this.deps.sql
    if (mail.value_sealed === null) {
      await sql`update connector_mails set status = 'failed', last_error = 'the key value is gone' where id = ${mail.id}`
      return
    }
    const fields: MailFields = {
      key: open(this.deps.secretKey, mail.value_sealed).toString('utf8'),
      product: mail.product,
      policy: mail.policy ?? mail.product,
      expiry: mail.expires_at ? `\nIt is valid until ${mail.expires_at.toISOString().slice(0, 10)} (renewals extend it).\n` : '',
      to: mail.to_email,
    }
    const { subject, text } = render(this.template, fields)
    // A slow server may take its time over the final answer (RFC 5321 allows 10 minutes, nodemailer's
    // socketTimeout): the claim is renewed meanwhile, so no other node takes the mail and sends the key
    // twice; a node that dies mid-send stops renewing and another retries once the claim runs out.
    let renewing: Promise<unknown> = Promise.resolve()
    const renew = setInterval(() => {
      renewing = renewing.then(() => sql`update connector_mails set next_attempt_at = now() + ${this.claimMs} * interval '1 millisecond'
          where id = ${mail.id} and status = 'pending'`.catch(() => {}))
    }, this.claimMs / 3)
    try {
      await this.transport!.sendMail({ from: this.deps.config.mailFrom!, to: mail.to_email, subject, text })
    } catch (err) {
      clearInterval(renew)
      await renewing // a renewal landing after the retry is scheduled would push the retry back
      await this.failed(mail, err)
      return
    }
    clearInterval(renew)
    await renewing
    // accepted by the SMTP server: the value is erased in the same statement that records it
    await sql`update connector_mails set status = 'sent', value_sealed = null, sent_at = now(), last_error = null where id = ${mail.id}`
  }

  private async failed(mail: Due, err: unknown) {
    const delays = this.deps.config.mailRetryDelaysMs
    // SMTP errors name the server's answer, never the message: safe to show on the connector page
    const message = String((err as { message?: unknown })?.message ?? err).slice(0, 500)
    if (mail.attempts > delays.length) {
      // given up: the value is erased too (reissue the key to send a new one)
      await this.deps.sql`update connector_mails set status = 'failed', value_sealed = null, last_error = ${message} where id = ${mail.id}`
      return
    }
    const delay = delays[mail.attempts - 1]!
    await this.deps.sql`update connector_mails set last_error = ${message},
        next_attempt_at = now() + ${delay} * interval '1 millisecond' where id = ${mail.id}`
  }
}

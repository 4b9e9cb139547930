import { NullableTimestamp, OneOf, PlainText, t, Timestamp } from '../../http/schema'

export const PROVIDERS = ['stripe', 'paddle', 'lemonsqueezy'] as const
export type Provider = (typeof PROVIDERS)[number]
const ProviderField = OneOf(PROVIDERS, { description: 'The payment provider whose webhooks this connector receives' })

export const Mapping = t.Object({
  price: t.String({
    minLength: 1,
    maxLength: 200,
    description: "The provider's price id (Stripe price_…, Paddle pri_…) or Lemon Squeezy variant id",
  }),
  policy_id: t.String({ description: 'The policy a key for this price gets (pol_…)' }),
})
export type Mapping = typeof Mapping.static

export const Connector = t.Object({
  id: t.String({ examples: ['con_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  provider: ProviderField,
  name: t.String(),
  mappings: t.Array(Mapping),
  email_keys: t.Boolean({ description: 'Email each new key to the buyer (needs SMTP_URL and MAIL_FROM on the server)' }),
  endpoint_path: t.String({ description: "The path to give the provider as its webhook endpoint, after this server's public URL", examples: ['/hooks/con_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  created_at: Timestamp,
  updated_at: Timestamp,
})
export type Connector = typeof Connector.static

export const OUTCOMES = ['processed', 'ignored', 'unmapped', 'malformed', 'bad_signature'] as const
export type Outcome = (typeof OUTCOMES)[number]

export const ReceivedEvent = t.Object({
  id: t.String({ description: 'cev_…' }),
  provider_event_id: t.Union([t.String(), t.Null()], { description: "The provider's event id; null for a refused event (not claimed: a redelivery is processed)" }),
  type: t.Union([t.String(), t.Null()], { description: "The provider's event type, when it could be read" }),
  outcome: OneOf(OUTCOMES, {
    description: 'processed (keys written), ignored (an event type or state that changes nothing), unmapped (no mapping for its price), malformed, bad_signature',
  }),
  detail: t.String({ description: 'What was done or why not, in words' }),
  key_ids: t.Array(t.String(), { description: 'The keys it created or changed' }),
  received_at: Timestamp,
})
export type ReceivedEvent = typeof ReceivedEvent.static

export const MailAttempt = t.Object({
  id: t.String({ description: 'mail_…' }),
  key_id: t.String(),
  to: t.String({ description: "The buyer's email address" }),
  status: t.Union([t.Literal('pending'), t.Literal('sent'), t.Literal('failed')], {
    description: 'pending (queued or retrying), sent (accepted by the SMTP server; the key value is erased), failed (gave up)',
  }),
  attempts: t.Integer(),
  last_error: t.Union([t.String(), t.Null()]),
  next_attempt_at: NullableTimestamp,
  created_at: Timestamp,
  sent_at: NullableTimestamp,
})
export type MailAttempt = typeof MailAttempt.static

export const ConnectorDetail = t.Composite([
  Connector,
  t.Object({
    mail_enabled: t.Boolean({ description: 'Whether this server can send mail (SMTP_URL and MAIL_FROM set); without it keys are issued but not emailed' }),
    events: t.Array(ReceivedEvent, { description: 'The last 50 received events, newest first' }),
    emails: t.Array(MailAttempt, { description: 'The last 50 key emails, newest first' }),
  }),
])
export type ConnectorDetail = typeof ConnectorDetail.static

export const ConnectorList = t.Object({ data: t.Array(Connector), mail_enabled: t.Boolean() })

const Name = PlainText(1, 200, { minLength: 1, maxLength: 200, description: '1..200 characters' })
const Secret = t.String({ minLength: 1, maxLength: 500, description: "The provider's webhook signing secret (write-only: never returned)" })
const Mappings = t.Array(Mapping, { maxItems: 100 })

export const CreateConnectorBody = t.Object({
  provider: ProviderField,
  name: Name,
  signing_secret: Secret,
  mappings: t.Optional(Mappings),
  email_keys: t.Optional(t.Boolean({ default: false })),
})
export type CreateConnectorBody = typeof CreateConnectorBody.static

export const PatchConnectorBody = t.Object({
  name: t.Optional(Name),
  signing_secret: t.Optional(Secret),
  mappings: t.Optional(Mappings),
  email_keys: t.Optional(t.Boolean()),
})
export type PatchConnectorBody = typeof PatchConnectorBody.static

export const HOOK_OUTCOMES = [...OUTCOMES, 'duplicate'] as const

export const HookAnswer = t.Object({
  received: t.Literal(true),
  outcome: OneOf(HOOK_OUTCOMES, { description: 'duplicate: this provider event was already processed; nothing changed' }),
  detail: t.String(),
})
export type HookAnswer = typeof HookAnswer.static

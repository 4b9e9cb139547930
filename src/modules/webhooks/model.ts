import type { TSchema } from '@sinclair/typebox'
import { Policy } from '../policies/model'
import { OneOf, t, Timestamp } from '../../http/schema'
import { PlanName } from '../accounts/model'
import { ApiKey } from '../api-keys/model'
import { Actor } from '../events/model'
import { EVENT_TYPES, type EventType } from '../events/outbox'
import { Activation } from '../activations/model'
import { Key } from '../keys/model'
import { Product } from '../products/model'
import { SigningKey } from '../signing/model'
import { RelayEvent } from '../relays/model'

export const EventTypeName = OneOf(EVENT_TYPES, { description: 'An event type' })

const Url = t.String({ minLength: 1, maxLength: 2048, description: 'http or https URL of a public host', examples: ['https://example.com/hooks/keyward'] })
const Events = t.Array(EventTypeName, { minItems: 1, maxItems: 64, description: 'Event types to receive (duplicates are ignored)' })

export const Webhook = t.Object({
  id: t.String({ examples: ['wh_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  url: t.String(),
  events: t.Array(EventTypeName),
  is_active: t.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
})
export type Webhook = typeof Webhook.static

export const WebhookWithSecret = t.Composite([
  Webhook,
  t.Object({
    secret: t.String({ description: 'whsec_ + base64 of 32 random bytes; shown only in this response', examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] }),
  }),
])
export type WebhookWithSecret = typeof WebhookWithSecret.static

export const DeliveryAttempt = t.Object({
  id: t.String({ examples: ['whd_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  event_id: t.String(),
  event_type: t.String(),
  attempt: t.Integer({ description: '1 for the first attempt of a delivery, then 2, 3, …' }),
  status_code: t.Union([t.Integer(), t.Null()], { description: 'null when no HTTP answer came (refused, timeout, connection error)' }),
  success: t.Boolean(),
  duration_ms: t.Integer(),
  error: t.Union([t.String(), t.Null()]),
  created_at: Timestamp,
})
export type DeliveryAttempt = typeof DeliveryAttempt.static

export const WebhookDetail = t.Composite([
  Webhook,
  t.Object({ deliveries: t.Array(DeliveryAttempt, { description: 'The last 20 attempts, newest first' }) }),
])
export type WebhookDetail = typeof WebhookDetail.static

export const WebhookList = t.Object({ data: t.Array(Webhook) })
export type WebhookList = typeof WebhookList.static

export const CreateWebhookBody = t.Object({ url: Url, events: Events })
export type CreateWebhookBody = typeof CreateWebhookBody.static

export const UpdateWebhookBody = t.Object({
  url: t.Optional(Url),
  events: t.Optional(Events),
  is_active: t.Optional(t.Boolean()),
})
export type UpdateWebhookBody = typeof UpdateWebhookBody.static

export const TestResult = t.Object({ delivery: DeliveryAttempt })

// What a receiver gets: one POST per event, body `{id, type, timestamp, actor, data}` (Standard Webhooks).
// Documented as the OpenAPI document's `webhooks`, one entry per event type.
const ActivationEvent = t.Object({ activation: Activation, key_id: t.String(), product_id: t.String() })
const PlanChanged = t.Object({ account_id: t.String(), previous_plan: PlanName, plan: PlanName })
export type ActivationEventData = typeof ActivationEvent.static
export type PlanChangedData = typeof PlanChanged.static

export const EVENT_DATA: Record<EventType, TSchema> = {
  'key.created': Key,
  'key.revoked': Key,
  'key.expired': Key,
  'key.extended': Key,
  'key.updated': Key,
  'activation.created': ActivationEvent,
  'activation.deactivated': ActivationEvent,
  'product.created': Product,
  'account.plan_changed': PlanChanged,
  'api_key.created': ApiKey,
  'product.updated': Product,
  'product.deleted': t.Composite([Product], { description: 'The product as it was when deleted' }),
  'api_key.rotated': t.Composite([ApiKey], { description: 'The API key with its new token_prefix (never the token)' }),
  'api_key.deleted': t.Composite([ApiKey], { description: 'The API key as it was when deleted' }),
  'webhook.created': t.Composite([Webhook], { description: 'The webhook (never its secret)' }),
  'webhook.updated': t.Composite([Webhook], { description: 'The webhook after the change (never its secret)' }),
  'webhook.deleted': t.Composite([Webhook], { description: 'The webhook as it was when deleted (never its secret)' }),
  'key.suspended': t.Composite([Key], { description: 'The key after the suspension (or its new reason or end)' }),
  'key.reinstated': t.Composite([Key], { description: 'The key after reinstatement (actor system when suspended_until was reached)' }),
  'key.reissued': t.Composite([Key], { description: 'The key with its new key_prefix (never the key value)' }),
  'policy.created': Policy,
  'policy.updated': t.Composite([Policy], { description: 'The policy after the change' }),
  'policy.deleted': t.Composite([Policy], { description: 'The policy as it was when deleted' }),
  'keys.imported': t.Object(
    {
      count: t.Integer({ description: 'Keys created by the import (skipped rows are not counted)' }),
      product_ids: t.Array(t.String(), { description: 'The products the new keys belong to, sorted' }),
    },
    { description: 'One event per import that created keys (never one per key; a dry run emits none)' },
  ),
  'key.credits_updated': t.Composite([Key], { description: 'The key after POST /v1/keys/:id/credits (add, subtract or set): credits.remaining is the new balance' }),
  'key.credits_exhausted': t.Composite([Key], {
    description: 'A validate spent the key\'s last credits (credits.remaining 0): sent once, not again until the balance was above 0 in between (actor device)',
  }),
  'signing_key.created': t.Composite([SigningKey], { description: 'The new signing key (pending; never its private half)' }),
  'signing_key.activated': t.Composite([SigningKey], {
    description: 'The key that now signs every answer and license (actor system when its activate_at came)',
  }),
  'signing_key.revoked': t.Composite([SigningKey], { description: 'The revoked key: it signs and verifies no more' }),
  'relay.created': t.Composite([RelayEvent], { description: "A relay licensed for seats of the key (they count in the key's activations_used)" }),
  'relay.deleted': t.Composite([RelayEvent], { description: 'The relay as it was when deleted: its seats are back with the key' }),
}

export const eventBody = (type: EventType) =>
  t.Object({
    id: t.String({ description: 'The event id (evt_…), also sent as webhook-id: the same on every retry', examples: ['evt_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
    type: t.Literal(type),
    timestamp: Timestamp,
    actor: Actor,
    data: EVENT_DATA[type],
  })

/** Every event type's delivery body, for the OpenAPI document's `webhooks`. */
export const WEBHOOK_EVENTS = Object.fromEntries(EVENT_TYPES.map((type) => [type, eventBody(type)]))

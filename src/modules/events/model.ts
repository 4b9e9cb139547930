import { Instant, OneOf, q, t, Timestamp } from '../../http/schema'
import { ACTOR_TYPES, EVENT_TYPES } from './outbox'

export const ListEventsQuery = q.Object({
  type: q.Optional(q.Union(EVENT_TYPES.map((type) => q.Literal(type)), { description: 'Only events of this type' })),
  resource_id: q.Optional(
    q.String({ maxLength: 64, description: 'Only events about this key, product, activation, webhook or API key (an activation\'s events also match its key)' }),
  ),
  since: q.Optional(Instant('Only events created at or after this instant')),
  // Bounded so page * page_size always fits the database's OFFSET.
  page: q.Optional(q.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
  page_size: q.Optional(q.Integer({ minimum: 1, maximum: 100, default: 20 })),
})
export type ListEventsQuery = typeof ListEventsQuery.static

export const Actor = t.Object(
  {
    type: OneOf(ACTOR_TYPES),
    id: t.Union([t.String(), t.Null()], { description: 'The API key (ak_…) for type api_key, the connector (con_…) for type connector, the activation (act_…) for type offline (an air-gapped device\'s code); null for the others' }),
  },
  { description: 'Who made the change: an API key, the operator, a device (validate, deactivate), the system (expiry, inactivity release) a payment connector (on its provider\'s webhook) or an air-gapped device (its request or deactivation code, brought by another machine)' },
)
export type Actor = typeof Actor.static

export const AuditEvent = t.Object({
  id: t.String({ examples: ['evt_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  type: t.String({ description: 'An event type (see the webhooks of this document for each type\'s data)' }),
  created_at: Timestamp,
  actor: Actor,
  data: t.Unknown({ description: "The event's data, as delivered to webhooks" }),
})
export type AuditEvent = typeof AuditEvent.static

export const EventPage = t.Object({
  data: t.Array(AuditEvent, { description: 'Newest first' }),
  page: t.Integer(),
  page_size: t.Integer(),
  total: t.Integer(),
  has_more: t.Boolean(),
})
export type EventPage = typeof EventPage.static

// The contract's event vocabulary: every event type the service emits (webhooks subscribe to these,
// `GET /v1/events?type=` filters by them) and who can cause one. No imports: the console's browser
// bundle reads this file too, so its webhook form offers exactly the types the server emits.
export const EVENT_TYPES = [
  'key.created',
  'key.revoked',
  'key.expired',
  'key.extended',
  'key.updated',
  'activation.created',
  'activation.deactivated',
  'product.created',
  'account.plan_changed',
  'api_key.created',
  'product.updated',
  'product.deleted',
  'api_key.rotated',
  'api_key.deleted',
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
  'key.suspended',
  'key.reinstated',
  'key.reissued',
  'policy.created',
  'policy.updated',
  'policy.deleted',
  'keys.imported',
  'key.credits_updated',
  'key.credits_exhausted',
  'signing_key.created',
  'signing_key.activated',
  'signing_key.revoked',
  'relay.created',
  'relay.deleted',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const ACTOR_TYPES = ['api_key', 'operator', 'device', 'system', 'connector', 'offline'] as const
export type ActorType = (typeof ACTOR_TYPES)[number]

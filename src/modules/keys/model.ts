import { OVERRIDABLE, type OverridableField } from '../../core/key-settings'
import { Instant, NullableTimestamp, OneOf, q, t, Timestamp } from '../../http/schema'
import { EMAIL_MAX, TEXT_MAX } from '../../core/customer'
import { Activation } from '../activations/model'
import { Credits, CreditsIn } from '../credits/model'
import { ComponentMatch } from '../policies/model'
import { RelaySummary } from '../relays/model'

export const KeyStatus = t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('suspended'), t.Literal('expired')])
export type KeyStatus = typeof KeyStatus.static

export const CustomerView = t.Object(
  {
    email: t.Union([t.String(), t.Null()], { description: 'Stored lower-cased' }),
    name: t.Union([t.String(), t.Null()]),
    external_id: t.Union([t.String(), t.Null()], { description: "The customer's id in the vendor's or the payment provider's system" }),
  },
  { title: 'Customer' },
)

/** Checked in the service (core/customer.ts) so every problem names its field (`body.customer.email`). */
const CustomerIn = t.Unknown({
  description:
    `null (no customer) or {email?, name?, external_id?}, at least one: email one valid address of at most ${EMAIL_MAX} characters ` +
    `(stored lower-cased), name and external_id text of 1..${TEXT_MAX} characters; on PATCH it replaces the whole customer`,
})

export const Key = t.Object({
  id: t.String({ examples: ['key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  product_id: t.String(),
  plan: t.Union([t.String(), t.Null()]),
  status: t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('suspended'), t.Literal('expired')], {
    description:
      'Effective status, first match wins: revoked > suspended > expired > active (a key past expires_at is expired even before the sweeper ran)',
  }),
  activation_limit: t.Integer(),
  activations_used: t.Integer({ description: "Seats taken: devices currently activated, plus the seats of the key's relays" }),
  expires_at: NullableTimestamp,
  created_at: Timestamp,
  revoked_at: NullableTimestamp,
  revoke_reason: t.Union([t.String(), t.Null()]),
  suspended_at: t.Union([t.String({ format: 'date-time' }), t.Null()], { description: 'When the current suspension began; null when not suspended' }),
  suspend_reason: t.Union([t.String(), t.Null()]),
  suspended_until: t.Union([t.String({ format: 'date-time' }), t.Null()], {
    description: 'When the system reinstates the key by itself (within a few seconds); null = until reinstated',
  }),
  metadata: t.Record(t.String(), t.Unknown()),
  key_prefix: t.String({ description: 'First 5 characters of the key value, for support look-ups' }),
  release_after_seconds: t.Union([t.Integer(), t.Null()], {
    description: 'An active device that has not validated for this long is released (reason inactive); null = never',
  }),
  deactivations_allowed: t.Union([t.Integer(), t.Null()], { description: 'Devices the key holder may release over the key\'s life; null = unlimited' }),
  deactivations_used: t.Integer({ description: 'Devices the key holder released so far (admin removals and inactivity releases do not count)' }),
  entitlements: t.Record(t.String(), t.Union([t.Literal(true), t.Number(), t.String()]), {
    description: 'What the key unlocks, {code: value} (effective: nulls removed); every valid validate answer carries it',
  }),
  grace_seconds: t.Integer({ description: 'After expires_at, validate stays valid this long, marked expired: true' }),
  after_expiry: t.Union([t.Literal('refuse'), t.Literal('keep')], {
    description: 'refuse: past expires_at + grace_seconds validate answers expired; keep: valid forever, marked expired: true',
  }),
  component_match: ComponentMatch,
  policy_id: t.Union([t.String(), t.Null()], { description: 'The policy it inherits from; null = none' }),
  expiry_pending: t.Boolean({
    description: "true until the first activation of a key whose policy starts the duration then (expiry_basis first_activation): expires_at is null until that activation sets it",
  }),
  external_id: t.Union([t.String(), t.Null()], {
    description: "The key's id in the system it was imported from (unique per account); null for a key made here",
  }),
  overrides: t.Record(t.String(), t.Unknown(), {
    description: 'For a key with a policy: exactly the settings the key sets itself (the other values shown are its policy\'s); {} when none, and for a key without a policy',
  }),
  credits: Credits,
  customer: t.Union([CustomerView, t.Null()], { description: 'Who holds the key; null = not recorded. Searchable with GET /v1/keys?q=' }),
})
export type Key = typeof Key.static

export const CreatedKey = t.Composite([
  Key,
  t.Object({ key_value: t.String({ description: 'The license key; shown only in this response', examples: ['ABCDE-FGHJK-MNPQR-STVWX-YZ012'] }) }),
])
export type CreatedKey = typeof CreatedKey.static

export const KeyDetail = t.Composite([
  Key,
  t.Object({
    activations: t.Array(Activation),
    relays: t.Array(RelaySummary, { description: "The key's relays (not deleted), oldest first: their seats count in activations_used" }),
  }),
])
export type KeyDetail = typeof KeyDetail.static

const ReleaseAfter = t.Union([t.Integer({ minimum: 60, maximum: 31536000 }), t.Null()], {
  description: 'Seconds without a validate after which a device is released (60 s to 365 days); null = never',
})
const DeactivationsAllowed = t.Union([t.Integer({ minimum: 0, maximum: 10000 }), t.Null()], {
  description: 'How many devices the key holder may release (0 = none); null = unlimited',
})

/** The settings a key may set itself over its policy (and PATCH `reset` may drop): core/key-settings.ts. */
export const RESETTABLE = OVERRIDABLE
export type Resettable = OverridableField

const EntitlementsField = t.Unknown({
  description:
    'A JSON object {code: value}, at most 64 entries: code ^[a-z0-9][a-z0-9._:-]{0,63}$, value true, a finite number or a string (1..200); on PATCH it replaces the whole map',
})
const GraceSeconds = t.Union([t.Integer({ minimum: 0, maximum: 31536000 }), t.Null()], { description: '0..31536000; null = 0' })
const AfterExpiry = t.Union([t.Literal('refuse'), t.Literal('keep'), t.Null()], { description: 'null = refuse' })

/** The settings create and PATCH take alike (the rest differ in what they say or allow). */
const SettingsIn = {
  release_after_seconds: t.Optional(ReleaseAfter),
  deactivations_allowed: t.Optional(DeactivationsAllowed),
  entitlements: t.Optional(EntitlementsField),
  grace_seconds: t.Optional(GraceSeconds),
  after_expiry: t.Optional(AfterExpiry),
  component_match: t.Optional(t.Union([ComponentMatch, t.Null()], { description: "Machine identity's rule (off, any, two, most, all); null = the policy's, else off" })),
  credits: t.Optional(CreditsIn),
}

export const CreateKeyBody = t.Object({
  product_id: t.Optional(t.String({ description: 'Required without policy_id; with one, omitted or equal to the policy\'s product' })),
  policy_id: t.Optional(
    t.Union([t.String(), t.Null()], {
      description: 'A policy of the product: the key inherits every setting it does not set itself, and its expiry from the policy\'s duration',
    }),
  ),
  plan: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()])),
  activation_limit: t.Optional(t.Integer({ minimum: 1, maximum: 10000, description: "Default: the policy's, else 3" })),
  expires_at: t.Optional(t.Union([Instant('Must be in the future; omit or null for a perpetual key'), t.Null()])),
  metadata: t.Optional(t.Unknown({ description: 'A JSON object, at most 8 KiB serialized' })),
  customer: t.Optional(CustomerIn),
  ...SettingsIn,
})
export type CreateKeyBody = typeof CreateKeyBody.static

/** Every field optional; an omitted field keeps its value, unknown fields are ignored. */
export const PatchKeyBody = t.Object({
  plan: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()])),
  activation_limit: t.Optional(t.Integer({ minimum: 1, maximum: 10000, description: 'Lowering it below activations_used deactivates nothing' })),
  metadata: t.Optional(t.Unknown({ description: 'Replaces the whole object: a JSON object, at most 8 KiB serialized' })),
  customer: t.Optional(CustomerIn),
  ...SettingsIn,
  reset: t.Optional(
    t.Array(OneOf(RESETTABLE), {
      uniqueItems: true,
      description: 'Settings to drop from the key: back to its policy\'s value (or the default without a policy); not together with a value for the same field',
    }),
  ),
})
export type PatchKeyBody = typeof PatchKeyBody.static

/** The start of a key value as stored in key_prefix: 1 to 5 Crockford base32 characters, upper case. */
export const KEY_PREFIX_PATTERN = '^[0-9A-HJKMNP-TV-Z]{1,5}$'

export const ListKeysQuery = q.Object({
  product_id: q.Optional(q.String()),
  status: q.Optional(q.Union([q.Literal('active'), q.Literal('revoked'), q.Literal('suspended'), q.Literal('expired')], {
    description: 'Effective status (revoked > suspended > expired > active)',
  })),
  plan: q.Optional(q.String({ maxLength: 64 })),
  policy_id: q.Optional(q.String({ description: 'Only keys of this policy' })),
  key_prefix: q.Optional(
    q.String({
      pattern: KEY_PREFIX_PATTERN,
      description:
        'Only keys whose key value starts with these 1 to 5 characters (key_prefix as shown: 0-9 and upper-case A-Z without I, L, O, U); anything else is 400',
      examples: ['ABCDE'],
    }),
  ),
  q: q.Optional(
    q.String({
      minLength: 1,
      maxLength: 200,
      description:
        "Search: keys whose id, external_id or customer.external_id equals q, whose key_prefix starts with q (1 to 5 of its characters, any case), " +
        "or whose customer e-mail or name contains q ignoring case. Combines with the other filters",
      examples: ['jane@acme.com'],
    }),
  ),
  // Bounded so page * page_size always fits the database's OFFSET; deeper pages would be empty anyway.
  page: q.Optional(q.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
  page_size: q.Optional(q.Integer({ minimum: 1, maximum: 100, default: 20 })),
})

export const KeyPage = t.Object({
  data: t.Array(Key),
  page: t.Integer(),
  page_size: t.Integer(),
  total: t.Integer(),
  has_more: t.Boolean(),
})
export type KeyPage = typeof KeyPage.static

export const RevokeBody = t.Object({ reason: t.Optional(t.Union([t.String({ maxLength: 500 }), t.Null()])) })
export const ExtendBody = t.Object({
  expires_at: t.Union([Instant('New expiry, in the future; null makes the key perpetual'), t.Null()]),
})

export const SuspendBody = t.Object({
  reason: t.Optional(t.Union([t.String({ maxLength: 500 }), t.Null()])),
  until: t.Optional(t.Union([Instant('In the future: the key is reinstated by the system then; omit or null = until reinstated'), t.Null()])),
})
export type SuspendBody = typeof SuspendBody.static

import { Instant, NullableTimestamp, q, t, Timestamp } from '../../http/schema'
import { Activation } from '../activations/model'

export const KeyStatus = t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('expired')])
export type KeyStatus = typeof KeyStatus.static

export const Key = t.Object({
  id: t.String({ examples: ['key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  product_id: t.String(),
  plan: t.Union([t.String(), t.Null()]),
  status: t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('expired')], {
    description: 'Effective status: a key past expires_at is expired even before the sweeper ran',
  }),
  activation_limit: t.Integer(),
  activations_used: t.Integer({ description: 'Devices currently activated' }),
  expires_at: NullableTimestamp,
  created_at: Timestamp,
  revoked_at: NullableTimestamp,
  revoke_reason: t.Union([t.String(), t.Null()]),
  metadata: t.Record(t.String(), t.Unknown()),
  key_prefix: t.String({ description: 'First 5 characters of the key value, for support look-ups' }),
  release_after_seconds: t.Union([t.Integer(), t.Null()], {
    description: 'An active device that has not validated for this long is released (reason inactive); null = never',
  }),
  deactivations_allowed: t.Union([t.Integer(), t.Null()], { description: 'Devices the key holder may release over the key\'s life; null = unlimited' }),
  deactivations_used: t.Integer({ description: 'Devices the key holder released so far (admin removals and inactivity releases do not count)' }),
})
export type Key = typeof Key.static

export const CreatedKey = t.Composite([
  Key,
  t.Object({ key_value: t.String({ description: 'The license key; shown only in this response', examples: ['ABCDE-FGHJK-MNPQR-STVWX-YZ012'] }) }),
])

export const KeyDetail = t.Composite([Key, t.Object({ activations: t.Array(Activation) })])

const ReleaseAfter = t.Union([t.Integer({ minimum: 60, maximum: 31536000 }), t.Null()], {
  description: 'Seconds without a validate after which a device is released (60 s to 365 days); null = never',
})
const DeactivationsAllowed = t.Union([t.Integer({ minimum: 0, maximum: 10000 }), t.Null()], {
  description: 'How many devices the key holder may release (0 = none); null = unlimited',
})

export const CreateKeyBody = t.Object({
  product_id: t.String(),
  plan: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()])),
  activation_limit: t.Optional(t.Integer({ minimum: 1, maximum: 10000, default: 3 })),
  expires_at: t.Optional(t.Union([Instant('Must be in the future; omit or null for a perpetual key'), t.Null()])),
  metadata: t.Optional(t.Unknown({ description: 'A JSON object, at most 8 KiB serialized' })),
  release_after_seconds: t.Optional(ReleaseAfter),
  deactivations_allowed: t.Optional(DeactivationsAllowed),
})
export type CreateKeyBody = typeof CreateKeyBody.static

/** Every field optional; an omitted field keeps its value, unknown fields are ignored. */
export const PatchKeyBody = t.Object({
  plan: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()])),
  activation_limit: t.Optional(t.Integer({ minimum: 1, maximum: 10000, description: 'Lowering it below activations_used deactivates nothing' })),
  metadata: t.Optional(t.Unknown({ description: 'Replaces the whole object: a JSON object, at most 8 KiB serialized' })),
  release_after_seconds: t.Optional(ReleaseAfter),
  deactivations_allowed: t.Optional(DeactivationsAllowed),
})
export type PatchKeyBody = typeof PatchKeyBody.static

/** The start of a key value as stored in key_prefix: 1 to 5 Crockford base32 characters, upper case. */
export const KEY_PREFIX_PATTERN = '^[0-9A-HJKMNP-TV-Z]{1,5}$'

export const ListKeysQuery = q.Object({
  product_id: q.Optional(q.String()),
  status: q.Optional(q.Union([q.Literal('active'), q.Literal('revoked'), q.Literal('expired')])),
  plan: q.Optional(q.String({ maxLength: 64 })),
  key_prefix: q.Optional(
    q.String({
      pattern: KEY_PREFIX_PATTERN,
      description:
        'Only keys whose key value starts with these 1 to 5 characters (key_prefix as shown: 0-9 and upper-case A-Z without I, L, O, U); anything else is 400',
      examples: ['ABCDE'],
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

export const RevokeBody = t.Object({ reason: t.Optional(t.Union([t.String({ maxLength: 500 }), t.Null()])) })
export const ExtendBody = t.Object({
  expires_at: t.Union([Instant('New expiry, in the future; null makes the key perpetual'), t.Null()]),
})

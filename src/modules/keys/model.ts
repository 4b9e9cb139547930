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
})
export type Key = typeof Key.static

export const CreatedKey = t.Composite([
  Key,
  t.Object({ key_value: t.String({ description: 'The license key; shown only in this response', examples: ['ABCDE-FGHJK-MNPQR-STVWX-YZ012'] }) }),
])

export const KeyDetail = t.Composite([Key, t.Object({ activations: t.Array(Activation) })])

export const CreateKeyBody = t.Object({
  product_id: t.String(),
  plan: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()])),
  activation_limit: t.Optional(t.Integer({ minimum: 1, maximum: 10000, default: 3 })),
  expires_at: t.Optional(t.Union([Instant('Must be in the future; omit or null for a perpetual key'), t.Null()])),
  metadata: t.Optional(t.Unknown({ description: 'A JSON object, at most 8 KiB serialized' })),
})
export type CreateKeyBody = typeof CreateKeyBody.static

export const ListKeysQuery = q.Object({
  product_id: q.Optional(q.String()),
  status: q.Optional(q.Union([q.Literal('active'), q.Literal('revoked'), q.Literal('expired')])),
  plan: q.Optional(q.String({ maxLength: 64 })),
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

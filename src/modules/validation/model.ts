import { NullableTimestamp, t, Timestamp } from '../../http/schema'

/**
 * `key` is any string of 1..256 characters: one that cannot be a key value (not 25 Crockford
 * characters once hyphens and case are normalised) is answered `valid: false, not_found`, exactly like
 * an unknown key, so the answer does not tell a typo from a guess. Empty or absurdly long is a 400.
 */
const KeyValue = t.String({ minLength: 1, maxLength: 256, examples: ['ABCDE-FGHJK-MNPQR-STVWX-YZ012'] })
const Fingerprint = t.String({
  pattern: '^[0-9a-fA-F]{64}$',
  description: '64 hex characters (e.g. a SHA-256 of hardware identifiers); case-insensitive',
})

/**
 * 1..100 Unicode code points, none a control character (C0, DEL, C1). The pattern counts a surrogate
 * pair as one code point and refuses a lone surrogate (not storable as UTF-8) and U+FFFD (what the fast
 * path's JSON reader makes of invalid UTF-8), so both doors refuse the same names without a `u` flag.
 */
export const DeviceName = t.String({
  pattern: '^(?:[^\\u0000-\\u001F\\u007F-\\u009F\\uD800-\\uDFFF\\uFFFD]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]){1,100}$',
  description: "The holder's label for this device, e.g. \"Alice's MacBook\": 1..100 characters, no control characters. " +
    'Stored when the device is activated, replaced when a later validate sends a different one, kept when omitted.',
  examples: ["Alice's MacBook"],
})

export const ValidateBody = t.Object({
  key: KeyValue,
  device_fingerprint: Fingerprint,
  app_version: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()])),
  product_id: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()], { description: 'When given, must be the key\'s product, else not_found' })),
  device_name: t.Optional(DeviceName),
})
export type ValidateBody = typeof ValidateBody.static

export type Reason = 'not_found' | 'revoked' | 'expired' | 'activation_limit'

export const ValidAnswer = t.Object({
  valid: t.Literal(true),
  plan: t.Union([t.String(), t.Null()]),
  expires_at: t.Union([t.String({ format: 'date-time' }), t.Null()]),
  activations_used: t.Integer({ description: 'Devices holding a slot, this one included' }),
  activation_limit: t.Integer(),
})
export const InvalidAnswer = t.Object({
  valid: t.Literal(false),
  reason: t.Union([t.Literal('not_found'), t.Literal('revoked'), t.Literal('expired'), t.Literal('activation_limit')]),
})
export const ValidateAnswer = t.Union([ValidAnswer, InvalidAnswer])
export type ValidateAnswer = typeof ValidateAnswer.static

export const DeactivateBody = t.Object({ key: KeyValue, device_fingerprint: Fingerprint })
export type DeactivateBody = typeof DeactivateBody.static

export const DeactivateAnswer = t.Object({
  deactivated: t.Boolean(),
  activations_used: t.Integer({ description: 'Active devices after this call (0 for an unknown key)' }),
  activation_limit: t.Integer({ description: 'The key\'s limit (0 for an unknown key)' }),
})
export type DeactivateAnswer = typeof DeactivateAnswer.static

export const DevicesBody = t.Object({
  key: KeyValue,
  product_id: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()], { description: "When given, must be the key's product, else 404" })),
})
export type DevicesBody = typeof DevicesBody.static

export const Device = t.Object({
  device_fingerprint: t.String(),
  device_name: t.Union([t.String(), t.Null()]),
  app_version: t.Union([t.String(), t.Null()]),
  country: t.Union([t.String(), t.Null()]),
  activated_at: Timestamp,
  last_validated_at: NullableTimestamp,
})

export const DevicesAnswer = t.Object({
  status: t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('expired')]),
  activation_limit: t.Integer(),
  activations_used: t.Integer({ description: 'Devices holding a slot now' }),
  deactivations_allowed: t.Union([t.Integer(), t.Null()], { description: 'Releases the holder may make over the key\'s life (null = no cap)' }),
  deactivations_used: t.Integer({ description: 'Releases the holder has made (admin removals and inactivity releases do not count)' }),
  devices: t.Array(Device, { description: 'The active activations, oldest first' }),
})
export type DevicesAnswer = typeof DevicesAnswer.static

export const ActivationParams = t.Object({ id: t.String(), activation_id: t.String() })

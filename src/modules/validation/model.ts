import { NullableTimestamp, OneOf, PlainText, t, Timestamp } from '../../http/schema'
import { REFUSAL_REASONS, type RefusalReason } from '../../core/outcomes'
import { ComponentsIn, StoredComponents } from '../activations/model'

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

/** 1..100 code points, no control characters (PlainText in http/schema.ts says how the pattern counts). */
export const DeviceName = PlainText(1, 100, {
  description: "The holder's label for this device, e.g. \"Alice's MacBook\": 1..100 characters, no control characters. " +
    'Stored when the device is activated, replaced when a later validate sends a different one, kept when omitted.',
  examples: ["Alice's MacBook"],
})

export const ValidateBody = t.Object({
  key: KeyValue,
  device_fingerprint: Fingerprint,
  app_version: t.Optional(t.Union([PlainText(0, 64, { maxLength: 64, description: 'The app\'s version, e.g. 2.4.1: at most 64 characters, no control characters' }), t.Null()])),
  product_id: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()], { description: 'When given, must be the key\'s product, else not_found' })),
  device_name: t.Optional(DeviceName),
  require_entitlements: t.Optional(
    t.Array(t.String({ pattern: '^[a-z0-9][a-z0-9._:-]{0,63}$' }), {
      minItems: 1,
      maxItems: 16,
      description: 'Entitlement codes the app needs (1..16): any code the key lacks → valid: false, reason entitlements_missing, nothing recorded',
    }),
  ),
  cost: t.Optional(
    t.Integer({
      minimum: 0,
      maximum: 1_000_000,
      description: 'Metered keys: credits this call spends when valid (0..1,000,000, default 1; 0 checks without spending). Ignored for unmetered keys.',
    }),
  ),
  components: t.Optional(ComponentsIn),
})
export type ValidateBody = typeof ValidateBody.static

export type Reason = RefusalReason

export const ValidAnswer = t.Object({
  valid: t.Literal(true),
  plan: t.Union([t.String(), t.Null()]),
  expires_at: t.Union([t.String({ format: 'date-time' }), t.Null()]),
  activations_used: t.Integer({ description: 'Devices holding a seat, this one included' }),
  activation_limit: t.Integer(),
  policy_id: t.Union([t.String(), t.Null()], { description: 'The policy the key inherits from; null = none' }),
  entitlements: t.Record(t.String(), t.Union([t.Literal(true), t.Number(), t.String()]), { description: "The key's effective entitlements ({} when none)" }),
  expired: t.Boolean({ description: 'true only past expires_at: in grace, or kept after expiry (after_expiry keep)' }),
  grace_until: t.Union([t.String({ format: 'date-time' }), t.Null()], {
    description: 'When the grace after expires_at ends (expires_at + grace_seconds); null when there is none (no expiry, no grace, or kept)',
  }),
  credits_remaining: t.Union([t.Integer(), t.Null()], {
    description: "Metered key: its balance after this call's cost, as this node knows it (other nodes' spending shows within about 2 s); null = unmetered",
  }),
})
export const InvalidAnswer = t.Object({
  valid: t.Literal(false),
  reason: OneOf(REFUSAL_REASONS),
  missing: t.Optional(t.Array(t.String(), { description: 'With entitlements_missing only: the required codes the key lacks, in request order' })),
  credits_remaining: t.Optional(t.Integer({ description: 'With credits_exhausted only: the balance left (less than the cost asked)' })),
  refills_at: t.Optional(t.Union([t.String({ format: 'date-time' }), t.Null()], { description: 'With credits_exhausted only: the next refill, or null when the key has no refill rule' })),
})
export const ValidateAnswer = t.Union([ValidAnswer, InvalidAnswer])
export type ValidateAnswer = typeof ValidateAnswer.static

const FormOnly = t.Optional(
  t.Union([ComponentsIn], { description: "The device's components, checked for form only (400 if malformed): the fingerprint identifies the device here" }),
)

export const DeactivateBody = t.Object({ key: KeyValue, device_fingerprint: Fingerprint, components: FormOnly })
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
  components: FormOnly,
})
export type DevicesBody = typeof DevicesBody.static

export const Device = t.Object({
  device_fingerprint: t.String(),
  device_name: t.Union([t.String(), t.Null()]),
  app_version: t.Union([t.String(), t.Null()]),
  country: t.Union([t.String(), t.Null()]),
  activated_at: Timestamp,
  last_validated_at: NullableTimestamp,
  components: StoredComponents,
  components_changed_at: t.Union([t.String({ format: 'date-time' }), t.Null()], { description: 'When the stored components last changed' }),
  replaced_fingerprints: t.Array(t.String(), { description: 'Fingerprints this device was rebound from, newest first (at most 8)' }),
})

export const DevicesAnswer = t.Object({
  status: t.Union([t.Literal('active'), t.Literal('revoked'), t.Literal('suspended'), t.Literal('expired')], {
    description: 'Effective status: revoked > suspended > expired > active',
  }),
  activation_limit: t.Integer(),
  activations_used: t.Integer({ description: 'Devices holding a seat now' }),
  deactivations_allowed: t.Union([t.Integer(), t.Null()], { description: 'Releases the holder may make over the key\'s life (null = no cap)' }),
  deactivations_used: t.Integer({ description: 'Releases the holder has made (admin removals and inactivity releases do not count)' }),
  devices: t.Array(Device, { description: 'The active activations, oldest first' }),
})
export type DevicesAnswer = typeof DevicesAnswer.static


import type { TInteger } from '@sinclair/typebox'
import { VALIDATE_OUTCOMES, type ValidateOutcome } from '../../core/outcomes'
import { q, t } from '../../http/schema'

export const Overview = t.Object({
  total_keys: t.Integer({ description: 'Every key of the account, whatever its status' }),
  active_keys: t.Integer({ description: 'Keys whose effective status is active (not revoked, not past expires_at)' }),
  total_activations: t.Integer({ description: 'Every activation ever recorded (deactivated ones included)' }),
  activations_today: t.Integer({ description: 'New activations since 00:00 UTC' }),
  expiring_soon: t.Integer({ description: 'Active keys whose expires_at falls within the next 7 days' }),
  api_calls_today: t.Integer({ description: 'Validate calls counted today (UTC)' }),
  api_calls_limit_today: t.Integer({ description: "The plan's daily validate limit; -1 when unlimited" }),
})
export type Overview = typeof Overview.static

export const RANGES = { '7d': 7, '30d': 30, '90d': 90 } as const
export type Range = keyof typeof RANGES

export const TrendQuery = q.Object({
  range: q.Optional(
    q.Union([q.Literal('7d'), q.Literal('30d'), q.Literal('90d')], { default: '7d', description: 'Days ending today (UTC)' }),
  ),
  product_id: q.Optional(q.String({ description: 'Only this product (default: all products)' })),
})

export const TrendEntry = t.Object({
  date: t.String({ description: 'UTC day, YYYY-MM-DD', examples: ['2026-11-22'] }),
  activations: t.Integer({ description: 'New activations that day' }),
})
export const Trend = t.Array(TrendEntry, { description: 'One entry per day, oldest first, zero-filled' })
export type TrendEntry = typeof TrendEntry.static

export const ValidationsQuery = q.Object({
  range: q.Optional(
    q.Union([q.Literal('7d'), q.Literal('30d'), q.Literal('90d')], { default: '30d', description: 'Days ending today (UTC)' }),
  ),
  product_id: q.Optional(q.String({ description: 'Only this product (not_found and rate_limited are then 0)' })),
})

/** What each outcome's count means; typed by the outcomes list, so a new outcome must be described here. */
const ANSWERED: Record<ValidateOutcome, string> = {
  valid: 'valid: true',
  not_found: 'reason not_found (belongs to no product)',
  revoked: 'reason revoked',
  suspended: 'reason suspended',
  expired: 'reason expired',
  entitlements_missing: 'reason entitlements_missing',
  device_already_used: 'reason device_already_used',
  activation_limit: 'reason activation_limit',
  credits_exhausted: 'reason credits_exhausted',
  device_mismatch: 'reason device_mismatch (components that do not match the device, or a replaced fingerprint)',
  rate_limited: '429 rate_limited (belongs to no product)',
}
const counts = Object.fromEntries(
  VALIDATE_OUTCOMES.map((o) => [o, t.Integer({ description: `Validate calls answered ${ANSWERED[o]} that day` })]),
) as Record<ValidateOutcome, TInteger>
export const ValidationsEntry = t.Object({
  date: t.String({ description: 'UTC day, YYYY-MM-DD', examples: ['2026-11-22'] }),
  ...counts,
})
export const Validations = t.Array(ValidationsEntry, {
  description: 'One entry per day, oldest first, zero-filled; counted on each node and written every FLUSH_INTERVAL_MS',
})
export type ValidationsEntry = typeof ValidationsEntry.static

export const CountryEntry = t.Object({
  country: t.String({ description: 'ISO 3166-1 alpha-2, upper case', examples: ['DE'] }),
  activations: t.Integer(),
})
export const Geography = t.Array(CountryEntry, { description: 'Activations descending, then country ascending' })
export type CountryEntry = typeof CountryEntry.static

export const CreditsQuery = q.Object({
  range: q.Optional(
    q.Union([q.Literal('7d'), q.Literal('30d'), q.Literal('90d')], { default: '30d', description: 'Days ending today (UTC)' }),
  ),
  product_id: q.Optional(q.String({ description: 'Only this product\'s keys' })),
  key_id: q.Optional(q.String({ description: 'Only this key' })),
})
export const CreditsEntry = t.Object({
  date: t.String({ description: 'UTC day, YYYY-MM-DD', examples: ['2026-11-22'] }),
  consumed: t.Integer({ description: 'Credits spent by valid validate answers of metered keys that day' }),
})
export type CreditsEntry = typeof CreditsEntry.static
export const CreditsConsumed = t.Array(CreditsEntry, {
  description: 'One entry per day, oldest first, zero-filled; counted on each node and written every FLUSH_INTERVAL_MS',
})

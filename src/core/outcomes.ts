// How a validate call can be answered: the one list that the metrics tally, the analytics counts and
// their API shape, the console's chart and the SDK's refusal type (through the OpenAPI enum of
// `reason`) are built from. No imports: the console's browser bundle reads this file too.

/** Why validate refuses a key (`valid: false`, the answer's `reason`). */
export const REFUSAL_REASONS = ['not_found', 'revoked', 'suspended', 'expired', 'entitlements_missing', 'device_already_used', 'activation_limit', 'credits_exhausted', 'device_mismatch'] as const
export type RefusalReason = (typeof REFUSAL_REASONS)[number]

/** Every outcome a validate call is counted under, in this order. */
export const VALIDATE_OUTCOMES = ['valid', ...REFUSAL_REASONS, 'rate_limited'] as const
export type ValidateOutcome = (typeof VALIDATE_OUTCOMES)[number]

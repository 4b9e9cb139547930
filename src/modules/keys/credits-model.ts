// Metered keys: the shapes of `credits` on keys and policies, and of POST /v1/keys/:id/credits.
import { t } from '../../http/schema'

const Amount = t.Integer({ minimum: 1, maximum: 1_000_000_000_000 })
const Balance = t.Integer({ minimum: 0, maximum: 1_000_000_000_000 })

export const RefillOut = t.Object({
  amount: t.Integer(),
  interval: t.Union([t.Literal('day'), t.Literal('month')]),
  day_of_month: t.Union([t.Integer(), t.Null()], { description: 'month only (1..31, clamped to the month\'s last day); null with day' }),
  mode: t.Union([t.Literal('top_up'), t.Literal('add')]),
})

export const RefillIn = t.Object(
  {
    amount: Amount,
    interval: t.Union([t.Literal('day'), t.Literal('month')], { description: 'day: at 00:00 UTC each day; month: on day_of_month at 00:00 UTC' }),
    day_of_month: t.Optional(t.Integer({ minimum: 1, maximum: 31, description: 'month only (default 1; clamped to the month\'s last day); with day it is 400' })),
    mode: t.Optional(
      t.Union([t.Literal('top_up'), t.Literal('add')], {
        description: 'top_up (default): remaining = max(remaining, amount), bought top-ups are never cut; add: amount added once per boundary passed',
      }),
    ),
  },
  { additionalProperties: false },
)
export type RefillIn = typeof RefillIn.static

export const Credits = t.Union(
  [
    t.Object({
      remaining: t.Integer({ description: 'Credits left: at most about 2 s behind the validations answered on every node' }),
      refill: t.Union([RefillOut, t.Null()]),
      refills_at: t.Union([t.String({ format: 'date-time' }), t.Null()], { description: 'The next refill; null without a refill rule' }),
    }),
    t.Null(),
  ],
  { description: 'Metered key: each valid validate spends its cost; null = unmetered' },
)
export type Credits = typeof Credits.static

export const CreditsIn = t.Union(
  [
    t.Object({ remaining: Balance, refill: t.Optional(t.Union([RefillIn, t.Null()])) }, { additionalProperties: false }),
    t.Null(),
  ],
  { description: 'null = unmetered; on PATCH, sets the balance and the refill rule (the refill period starts again)' },
)
export type CreditsIn = typeof CreditsIn.static

export const PolicyCredits = t.Union(
  [t.Object({ initial: Balance, refill: t.Union([RefillOut, t.Null()]) }), t.Null()],
  { description: 'Copied into each key created with the policy afterwards; null = its keys are unmetered' },
)
export const PolicyCreditsIn = t.Union(
  [t.Object({ initial: Balance, refill: t.Optional(t.Union([RefillIn, t.Null()])) }, { additionalProperties: false }), t.Null()],
  { description: 'null = unmetered keys; copied into keys created afterwards only (balances of existing keys do not move)' },
)
export type PolicyCreditsIn = typeof PolicyCreditsIn.static

export const CreditsBody = t.Object({
  operation: t.Union([t.Literal('add'), t.Literal('subtract'), t.Literal('set')], {
    description: 'add: remaining + amount; subtract: remaining - amount, stopping at 0; set: remaining = amount',
  }),
  amount: t.Integer({ minimum: 0, maximum: 1_000_000_000_000, description: '0..10^12 (add and subtract: at least 1)' }),
})
export type CreditsBody = typeof CreditsBody.static

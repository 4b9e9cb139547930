// Metered keys: the shapes of `credits` on keys and policies, of POST /v1/keys/:id/credits, and the one
// interface validate spends credits through (CreditLimiter, implemented by leases.ts).
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

/** Where a spend came from, to refund it: opaque outside leases.ts. */
export type SpentFrom = object

export type Spent =
  | { ok: true; remaining: number | null; from?: SpentFrom }
  | { ok: false; remaining: number; refillsAt: string | null }

/**
 * What the validate engine holds to spend metered keys' credits (Unkey's usage limiter: one call,
 * cost in, valid and remaining out). A key is named by the engine's own reference to it (`keyRef`:
 * the hot-state key); the answer is synchronous when this node already holds the credits.
 */
export interface CreditLimiter {
  /**
   * Spends `cost` credits of the metered key, owned by this account and product. Not ok: the balance
   * is below the cost and nothing was spent. `remaining` null: the key is not metered after all.
   */
  spend(keyRef: string, accountId: string, productId: string, cost: number, now: number): Spent | Promise<Spent>
  /** Gives back a spend whose call was refused after all (e.g. by its activation). */
  refund(from: SpentFrom | undefined, cost: number): void
  /** The periodic job: writes what is held and consumed, gives idle credits back. */
  flush(now?: number): Promise<void>
  /** Shutdown: every credit held goes back. */
  close(): Promise<void>
}

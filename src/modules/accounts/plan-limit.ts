// The plan's count limits (products, webhooks) hold under concurrency: a create takes the account row
// lock first, so two concurrent creates cannot both count one below the limit and both insert.
import { AppError } from '../../core/errors'
import type { Tx } from '../../infra/db'
import { PLAN_LIMITS, type Plan } from '../../core/plans'

type Counted = 'products' | 'webhooks'

const NOUN: Record<Counted, string> = { products: 'product(s)', webhooks: 'webhook(s)' }

/**
 * Locks the account row (until the transaction ends) and refuses with plan_limit_reached when the
 * account already has as many `what` as its plan allows. Call first in the create's transaction.
 */
export async function lockUnderPlanLimit(
  tx: Tx,
  accountId: string,
  what: Counted,
  count: (tx: Tx, accountId: string) => Promise<number>,
): Promise<void> {
  const [account] = await tx<{ plan: Plan }[]>`select plan from accounts where id = ${accountId} for update`
  const limit = PLAN_LIMITS[account.plan][what]
  if (limit !== null && (await count(tx, accountId)) >= limit) {
    throw new AppError('plan_limit_reached', `The ${account.plan} plan allows ${limit} ${NOUN[what]}; upgrade to create more`)
  }
}

// Metered keys on the admin side: the `credits` a key shows (the record, its due refills and what
// nodes hold in leases), its creation from the body or the policy, and POST /v1/keys/:id/credits.
// Validate's side (leases spent from memory) is modules/validation/credit-leases.ts.
import { applyRefills, MAX_CREDITS, type RefillRule } from '../../core/credits'
import { AppError, invalid, notFound } from '../../core/errors'
import type { Principal } from '../../core/principal'
import type { Deps } from '../../deps'
import type { Tx } from '../../infra/db'
import { isId } from '../../infra/crypto'
import { byApiKey, emit } from '../events/outbox'
import type { CreditsBody, CreditsIn, RefillIn } from './credits-model'
import type { Key } from './model'
import * as creditsRepo from './credits-repo'
import * as repo from './repo'

/** A refill rule as sent → as stored (day_of_month only with month). */
export function checkRefill(field: string, refill: RefillIn | null | undefined): RefillRule | null {
  if (refill == null) return null
  if (refill.interval === 'day' && refill.day_of_month !== undefined) throw invalid(`${field}.day_of_month`, 'is only for interval month')
  return {
    amount: refill.amount,
    interval: refill.interval,
    day_of_month: refill.interval === 'month' ? (refill.day_of_month ?? 1) : (null as unknown as number),
    mode: refill.mode ?? 'top_up',
  }
}

/** A new key's credits: its own when the body sets them (null = unmetered), else its policy's. */
export function initialCredits(
  input: CreditsIn | undefined,
  policy: { credits: { initial: number; refill: RefillRule | null } | null } | null,
): { remaining: number; refill: RefillRule | null } | null {
  if (input === undefined) return policy?.credits ? { remaining: policy.credits.initial, refill: policy.credits.refill } : null
  if (input === null) return null
  return { remaining: input.remaining, refill: checkRefill('body.credits.refill', input.refill) }
}

/**
 * POST /v1/keys/:id/credits: add, subtract (stopping at 0) or set, in force on every node before it
 * returns. The key's due refills are applied first. Emits key.credits_updated.
 */
export async function adjustCredits(deps: Deps, who: Principal, id: string, body: CreditsBody): Promise<Key> {
  if (body.operation !== 'set' && body.amount < 1) throw invalid('body.amount', 'must be at least 1 to add or subtract')
  const { key, keyHash } = await deps.sql.begin(async (tx) => {
    const locked = isId('key', id) ? await repo.lockKey(tx, who.accountId, id) : null
    if (!locked) throw notFound('key', id)
    const state = await creditsRepo.lockCredits(tx, id)
    if (state.remaining === null) throw new AppError('key_unmetered', `Key ${id} is unmetered (credits null): set credits with PATCH first`)
    const now = Date.now()
    const refilled = applyRefills(state.remaining, state.refill, state.since.getTime(), now, state.leased)
    const record = refilled?.remaining ?? state.remaining
    const since = refilled ? new Date(refilled.since) : state.since
    let next: { remaining: number; debt: number; epoch: number }
    if (body.operation === 'add') {
      next = { remaining: Math.min(MAX_CREDITS, record + body.amount), debt: state.debt, epoch: state.epoch }
    } else if (body.operation === 'set') {
      // the leases out are void: their unspent credits are not given back (the balance is now `amount`)
      next = { remaining: body.amount, debt: 0, epoch: state.epoch + 1 }
    } else {
      // what the record cannot give is owed by the leases out: their returns pay it first
      const short = body.amount - record
      next = short <= 0
        ? { remaining: record - body.amount, debt: state.debt, epoch: state.epoch }
        : { remaining: 0, debt: Math.min(state.debt + short, state.leased), epoch: state.epoch }
    }
    const cleared = next.epoch !== state.epoch
    const total = next.remaining + (cleared ? 0 : state.leased) - next.debt
    await creditsRepo.writeCredits(tx, id, { ...next, since, clearLeases: cleared, exhausted: total <= 0 })
    const key = (await repo.findKey(tx, who.accountId, id))!
    await emit(tx, who.accountId, 'key.credits_updated', key, byApiKey(who))
    return { key, keyHash: locked.key_hash }
  })
  // every node drops its lease of this key (a subtract's is given back to pay the debt) and any
  // remembered exhaustion, before this returns
  await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash })
  return key
}

/** PATCH credits on a locked key: a new balance and rule (the period starts now); null = unmetered. */
export async function replaceCredits(tx: Tx, id: string, credits: CreditsIn): Promise<void> {
  const rule = credits === null ? null : checkRefill('body.credits.refill', credits.refill)
  await creditsRepo.replaceCredits(tx, id, credits === null ? null : { remaining: credits.remaining, refill: rule })
}

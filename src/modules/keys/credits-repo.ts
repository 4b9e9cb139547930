import type { JSONValue } from 'postgres'
import { applyRefills, MAX_CREDITS, type RefillRule } from '../../core/credits'
import type { Sql, Tx } from '../../infra/db'
import type { Credits } from './credits-model'

/** A lease row counts while its node keeps writing it (every FLUSH_INTERVAL_MS); older, its node is gone. */
export const LIVE_LEASE = '15 seconds'

/** Unspent credits the live nodes hold in leases of key `k` (for the key's columns). */
export const leasedOf = (sql: Sql | Tx) => sql`(select coalesce(sum(l.held), 0) from credit_leases l
  where l.key_id = k.id and l.epoch = k.credits_epoch and l.updated_at > now() - ${LIVE_LEASE}::interval)`

export interface CreditsState {
  remaining: number | null
  refill: RefillRule | null
  since: Date
  epoch: number
  debt: number
  /** unspent credits in live leases */
  leased: number
  exhausted: boolean
}

/** The credits of a key whose row the caller locked. */
export async function lockCredits(tx: Tx, id: string): Promise<CreditsState> {
  const [r] = await tx<{ remaining: string | null; refill: RefillRule | null; since: Date | null; epoch: number; debt: string; leased: string; exhausted: boolean }[]>`
    select k.credits_remaining as remaining, k.credits_refill as refill, k.credits_since as since, k.credits_epoch as epoch,
      k.credits_debt as debt, k.credits_exhausted as exhausted, ${leasedOf(tx)} as leased
    from license_keys k where k.id = ${id}`
  return {
    remaining: r!.remaining === null ? null : Number(r!.remaining),
    refill: r!.refill,
    since: r!.since ?? new Date(),
    epoch: r!.epoch,
    debt: Number(r!.debt),
    leased: Number(r!.leased),
    exhausted: r!.exhausted,
  }
}

/**
 * New credit values for a locked key. key.credits_exhausted is for a consume that reaches 0: an admin
 * change to 0 counts as sent (`exhausted`), a balance above 0 re-arms it.
 */
export async function writeCredits(
  tx: Tx,
  id: string,
  c: { remaining: number; debt: number; epoch: number; since: Date; clearLeases: boolean; exhausted: boolean },
): Promise<void> {
  await tx`update license_keys set credits_remaining = ${c.remaining}, credits_debt = ${c.debt}, credits_epoch = ${c.epoch},
      credits_since = ${c.since}, credits_exhausted = ${c.exhausted}, updated_at = now()
    where id = ${id}`
  if (c.clearLeases) await tx`delete from credit_leases where key_id = ${id}`
}

/** PATCH credits: a new balance and rule (the refill period counts from now), or unmetered; leases out are void. */
export async function replaceCredits(tx: Tx, id: string, c: { remaining: number; refill: RefillRule | null } | null): Promise<void> {
  await tx`update license_keys set credits_remaining = ${c?.remaining ?? null},
      credits_refill = ${c?.refill ? tx.json(c.refill as unknown as JSONValue) : null},
      credits_since = ${c ? new Date() : null}, credits_epoch = credits_epoch + 1, credits_debt = 0,
      credits_exhausted = ${c?.remaining === 0}, updated_at = now()
    where id = ${id}`
  await tx`delete from credit_leases where key_id = ${id}`
}

/** The stored columns of a key's credits. */
export interface CreditsColumns {
  credits_remaining: number | string | null
  credits_refill: RefillRule | null
  credits_since: Date | null
  credits_debt: number | string
  /** unspent credits the live nodes hold in leases */
  credits_leased: number | string
}

/**
 * What a key shows: the record with the refills due by now (not written: the next write applies
 * them), plus what nodes hold unspent, less a subtract's debt not yet paid by their returns.
 */
export function creditsView(c: CreditsColumns, now = Date.now()): Credits {
  if (c.credits_remaining === null) return null
  const leased = Number(c.credits_leased)
  const record = Number(c.credits_remaining)
  const refilled = applyRefills(record, c.credits_refill, c.credits_since?.getTime() ?? now, now, leased)
  const remaining = Math.max(0, Math.min(MAX_CREDITS, (refilled?.remaining ?? record) + leased - Number(c.credits_debt)))
  return {
    remaining,
    refill: c.credits_refill,
    refills_at: refilled ? new Date(refilled.refillsAt).toISOString() : null,
  }
}

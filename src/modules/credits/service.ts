// Metered keys on the admin side: checking `credits` as sent (a key's, a policy's, an import row's),
// a new key's credits, the admin's add/subtract/set and PATCH, and the events: key.credits_updated on
// an admin change, key.credits_exhausted when a node's take leaves nothing (emitted here, in the
// record's transaction, never by the record itself). Validate's side (leases spent from memory) is
// leases.ts; the SQL is repo.ts. Credits do not import the keys module: the key as the API shows it
// (an event's payload, an answer) is read by the `FindKey` its caller passes in.
import { MAX_CREDITS, type RefillRule } from '../../core/credits'
import { AppError, invalid, notFound, type FieldError } from '../../core/errors'
import type { Principal } from '../../core/principal'
import { parseInstant } from '../../core/values'
import type { Deps } from '../../deps'
import type { Sql, Tx } from '../../infra/db'
import { isId } from '../../infra/crypto'
import { byApiKey, DEVICE, emit } from '../events/outbox'
import type { CreditsBody, CreditsIn, RefillIn } from './model'
import * as repo from './repo'

/** The key as the API shows it, read in the caller's transaction (keys/repo.ts findKey). */
export type FindKey<K> = (tx: Tx, accountId: string, id: string) => Promise<K | null>

/** A refill rule with its defaults filled in: day_of_month only with month (default 1), mode top_up. */
function ruleOf(amount: number, interval: 'day' | 'month', dayOfMonth: number | null | undefined, mode: 'top_up' | 'add' | null | undefined): RefillRule {
  return {
    amount,
    interval,
    day_of_month: interval === 'month' ? (dayOfMonth ?? 1) : (null as unknown as number),
    mode: mode ?? 'top_up',
  }
}

/** A refill rule as sent → as stored (day_of_month only with month). */
export function checkRefill(field: string, refill: RefillIn | null | undefined): RefillRule | null {
  if (refill == null) return null
  if (refill.interval === 'day' && refill.day_of_month !== undefined) throw invalid(`${field}.day_of_month`, 'is only for interval month')
  return ruleOf(refill.amount, refill.interval, refill.day_of_month, refill.mode)
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
export async function adjustCredits<K>(deps: Deps, who: Principal, id: string, body: CreditsBody, findKey: FindKey<K>): Promise<K> {
  if (body.operation !== 'set' && body.amount < 1) throw invalid('body.amount', 'must be at least 1 to add or subtract')
  const { key, keyHash } = await deps.sql.begin(async (tx) => {
    const state = isId('key', id) ? await repo.lockCredits(tx, who.accountId, id) : null
    if (!state) throw notFound('key', id)
    if (state.remaining === null) throw new AppError('key_unmetered', `Key ${id} is unmetered (credits null): set credits with PATCH first`)
    const { record, since } = repo.refilled(state.remaining, state.refill, state.since, Date.now(), state.leased)
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
    await repo.writeCredits(tx, id, { ...next, since, clearLeases: cleared, exhausted: total <= 0 })
    const key = (await findKey(tx, who.accountId, id))!
    await emit(tx, who.accountId, 'key.credits_updated', key, byApiKey(who))
    return { key, keyHash: state.keyHash }
  })
  // every node drops its lease of this key (a subtract's is given back to pay the debt) and any
  // remembered exhaustion, before this returns
  await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash })
  return key
}

/** PATCH credits on a locked key: a new balance and rule (the period starts now); null = unmetered. */
export async function replaceCredits(tx: Tx, id: string, credits: CreditsIn): Promise<void> {
  const rule = credits === null ? null : checkRefill('body.credits.refill', credits.refill)
  await repo.replaceCredits(tx, id, credits === null ? null : { remaining: credits.remaining, refill: rule })
}

/**
 * A node's take for its lease (repo.ts takeCredits), in one transaction with the key.credits_exhausted
 * it may announce (by the device: validate spent the last credits).
 */
export async function takeCredits<K>(sql: Sql, p: repo.Take, findKey: FindKey<K>): Promise<repo.Taken> {
  return sql.begin(async (tx) => {
    const { taken, exhausted } = await repo.takeCredits(tx, p)
    if (exhausted) await emit(tx, exhausted.accountId, 'key.credits_exhausted', (await findKey(tx, exhausted.accountId, exhausted.keyId))!, DEVICE)
    return taken
  })
}

// An import row's `credits`: checked as POST /v1/keys checks them, and read as an export writes them.

/** A row's own credits: the balance, the rule, and the refill boundary already applied to that balance. */
export interface ImportCredits {
  remaining: number
  refill: RefillRule | null
  /** the refill period counts from here: just before an export's past `refills_at` (that refill is due), else the import */
  since: Date | null
}

type Fields = Record<string, unknown>
const isObject = (v: unknown): v is Fields => v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * `credits` as on POST /v1/keys (`null`, or `{remaining (0..10^12), refill?}` with the same rule), and
 * as an export writes it: its `refills_at` (when the next refill was due there) and `day_of_month: null`
 * with interval day are accepted. The first problem is answered, with the field inside `credits`.
 */
export function checkCredits(v: unknown, now = Date.now()): { credits: ImportCredits | null } | FieldError {
  if (v === null) return { credits: null }
  const bad = (field: string, message: string): FieldError => ({ field: `credits${field}`, message })
  if (!isObject(v)) return bad('', 'must be null or {remaining, refill?}')
  for (const k of Object.keys(v)) if (k !== 'remaining' && k !== 'refill' && k !== 'refills_at') return bad(`.${k}`, 'is not a field of credits')
  const { remaining, refill, refills_at: refillsAt } = v
  if (typeof remaining !== 'number' || !Number.isInteger(remaining) || remaining < 0 || remaining > MAX_CREDITS) {
    return bad('.remaining', `must be an integer 0..${MAX_CREDITS}`)
  }
  let rule: RefillRule | null = null
  if (refill !== undefined && refill !== null) {
    if (!isObject(refill)) return bad('.refill', 'must be null or {amount, interval, day_of_month?, mode?}')
    for (const k of Object.keys(refill)) {
      if (!['amount', 'interval', 'day_of_month', 'mode'].includes(k)) return bad(`.refill.${k}`, 'is not a field of a refill rule')
    }
    const { amount, interval, day_of_month: day, mode } = refill
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount < 1 || amount > MAX_CREDITS) {
      return bad('.refill.amount', `must be an integer 1..${MAX_CREDITS}`)
    }
    if (interval !== 'day' && interval !== 'month') return bad('.refill.interval', 'must be one of: day, month')
    if (interval === 'day' && day != null) return bad('.refill.day_of_month', 'is only for interval month')
    if (interval === 'month' && day != null && (typeof day !== 'number' || !Number.isInteger(day) || day < 1 || day > 31)) {
      return bad('.refill.day_of_month', 'must be an integer 1..31')
    }
    if (mode != null && mode !== 'top_up' && mode !== 'add') return bad('.refill.mode', 'must be one of: top_up, add')
    rule = ruleOf(amount, interval, day as number | null | undefined, mode as 'top_up' | 'add' | null | undefined)
  }
  let since: Date | null = null
  if (refillsAt != null) {
    let at: Date
    try {
      at = parseInstant('credits.refills_at', typeof refillsAt === 'string' ? refillsAt : '')
    } catch {
      return bad('.refills_at', 'must be a valid ISO 8601 timestamp with a zone, or null')
    }
    // the exported balance has every refill before refills_at: one due since then is applied on import
    if (rule !== null && at.getTime() <= now) since = new Date(at.getTime() - 1)
  }
  return { credits: { remaining, refill: rule, since } }
}

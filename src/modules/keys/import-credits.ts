// An import row's `credits`: checked as POST /v1/keys checks them, and read as an export writes them.
import { MAX_CREDITS, type RefillRule } from '../../core/credits'
import type { FieldError } from '../../core/errors'
import { parseInstant } from '../../core/values'

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
    rule = {
      amount,
      interval,
      day_of_month: interval === 'month' ? ((day as number | null | undefined) ?? 1) : (null as unknown as number),
      mode: (mode as 'top_up' | 'add' | null | undefined) ?? 'top_up',
    }
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

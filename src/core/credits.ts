// Metered keys: the refill rule, computed from the period boundary when a balance is next read, so no
// job can miss or double a refill. Pure functions (no imports, no clock): callers pass `now`.

/** Most credits a balance or a refill may hold. */
export const MAX_CREDITS = 1_000_000_000_000

export interface RefillRule {
  amount: number
  interval: 'day' | 'month'
  /** month only: the day the refill happens, clamped to the month's last day (1..31) */
  day_of_month: number
  /** top_up: remaining = max(remaining, amount); add: remaining += amount per boundary passed */
  mode: 'top_up' | 'add'
}

const DAY_MS = 86_400_000

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month + 1, 0)).getUTCDate()

/** The month's refill instant: day_of_month at 00:00 UTC, clamped to the month's last day. */
const monthBoundary = (year: number, month: number, dayOfMonth: number) => Date.UTC(year, month, Math.min(dayOfMonth, daysIn(year, month)))

/** The first refill boundary strictly after `after` (epoch ms). */
export function nextBoundary(rule: RefillRule, after: number): number {
  if (rule.interval === 'day') return Math.floor(after / DAY_MS) * DAY_MS + DAY_MS
  const d = new Date(after)
  let year = d.getUTCFullYear()
  let month = d.getUTCMonth()
  for (;;) {
    const at = monthBoundary(year, month, rule.day_of_month)
    if (at > after) return at
    month += 1
    if (month === 12) {
      month = 0
      year += 1
    }
  }
}

/** How many refill boundaries lie in (since, now], and the last of them (or `since` when none). */
export function boundariesPassed(rule: RefillRule, since: number, now: number): { passed: number; last: number } {
  const first = nextBoundary(rule, since)
  if (first > now) return { passed: 0, last: since }
  if (rule.interval === 'day') {
    const passed = Math.floor((now - first) / DAY_MS) + 1
    return { passed, last: first + (passed - 1) * DAY_MS }
  }
  let passed = 1
  let last = first
  for (;;) {
    const next = nextBoundary(rule, last)
    if (next > now) return { passed, last }
    passed += 1
    last = next
  }
}

export interface Refilled {
  remaining: number
  /** the last boundary applied (unchanged when none passed) */
  since: number
  /** boundaries applied by this call */
  passed: number
  /** the next refill (epoch ms) */
  refillsAt: number
}

/**
 * The balance at `now` after the refills due since `since` (the last boundary applied, or when the
 * rule was set). `outstanding`: credits taken from the record but not yet spent or given back (node
 * leases): a top-up counts them as still held, so it tops up to `amount` in all, never above.
 */
export function applyRefills(remaining: number, rule: RefillRule | null, since: number, now: number, outstanding = 0): Refilled | null {
  if (rule === null) return null
  const { passed, last } = boundariesPassed(rule, since, now)
  let next = remaining
  if (passed > 0) {
    next = rule.mode === 'add' ? Math.min(MAX_CREDITS, remaining + rule.amount * passed) : Math.max(remaining, rule.amount - outstanding)
  }
  return { remaining: next, since: last, passed, refillsAt: nextBoundary(rule, now) }
}

// ISO 8601 periods (`P1Y`, `P1M`, `P14D`, `PT12H`, `P1Y6M`, ...) as a policy's `duration`, and the
// calendar arithmetic every added duration follows: in UTC, years, then months (clamped to the last
// day of the month: Jan 31 + P1M = Feb 28 or 29), then weeks, days, hours, minutes. No seconds and no
// fractions: a license term is counted in minutes at the finest.

export interface Period {
  years: number
  months: number
  weeks: number
  days: number
  hours: number
  minutes: number
}

const PATTERN = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?)?$/

/**
 * The shortest and longest period allowed (PT1M and P100Y), compared by their end from a fixed start:
 * 2001-01-01, a day that is no month's end (the clamp plays no part) and starts a century holding 24
 * leap days, so P36524D is allowed and P36525D is not.
 */
const MIN = { years: 0, months: 0, weeks: 0, days: 0, hours: 0, minutes: 1 }
const MAX = { years: 100, months: 0, weeks: 0, days: 0, hours: 0, minutes: 0 }
const REFERENCE = Date.UTC(2001, 0, 1)

/**
 * Parses a period, or returns why not: a message fit for a 400's field error. `T` must be followed by
 * hours or minutes, and every part is a whole number.
 */
export function parsePeriod(text: string): Period | string {
  const m = PATTERN.exec(text)
  if (m === null || text === 'P' || text.endsWith('T')) {
    return 'must be an ISO 8601 period such as P1Y, P1M, P14D, PT12H or P1Y6M (years, months, weeks, days, hours, minutes)'
  }
  const n = (i: number) => (m[i] === undefined ? 0 : Number(m[i]))
  const p: Period = { years: n(1), months: n(2), weeks: n(3), days: n(4), hours: n(5), minutes: n(6) }
  if (Object.values(p).some((v) => !Number.isSafeInteger(v))) return 'has a part too large'
  const end = addPeriod(REFERENCE, p)
  if (end < addPeriod(REFERENCE, MIN)) return 'must be at least PT1M'
  if (!Number.isFinite(end) || end > addPeriod(REFERENCE, MAX)) return 'must be at most P100Y'
  return p
}

const daysInMonth = (year: number, month: number) => new Date(Date.UTC(year, month + 1, 0)).getUTCDate()

/** `at` (epoch ms) + `p`, in UTC: years, then months (clamped to the month's last day), then the rest. */
export function addPeriod(at: number, p: Period): number {
  const d = new Date(at)
  const totalMonths = d.getUTCFullYear() * 12 + d.getUTCMonth() + p.years * 12 + p.months
  const year = Math.floor(totalMonths / 12)
  const month = totalMonths - year * 12
  const day = Math.min(d.getUTCDate(), daysInMonth(year, month))
  const base = Date.UTC(year, month, day, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds())
  return base + (((p.weeks * 7 + p.days) * 24 + p.hours) * 60 + p.minutes) * 60_000
}

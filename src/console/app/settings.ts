// The settings a key and a policy share (devices, inactivity release, holder releases, grace, what
// happens after expiry, a policy's term), told in words and typed as an amount with a unit. One place,
// so the key's page and the policy's page say the same thing the same way.
import { parsePeriod, type Period } from '../../core/durations'
import type { FieldError } from './api'
import { KEY_SETTINGS } from '../../core/key-settings'

/** Seconds in the largest unit that divides them: 86400 → 1 day. */
export const UNITS = [
  { name: 'days', seconds: 86400 },
  { name: 'hours', seconds: 3600 },
  { name: 'minutes', seconds: 60 },
] as const
export type Unit = (typeof UNITS)[number]['name']

export function splitSeconds(s: number | null): { amount: string; unit: Unit } {
  if (s === null) return { amount: '', unit: 'days' }
  const u = UNITS.find((x) => s % x.seconds === 0) ?? UNITS[2]
  return { amount: String(s / u.seconds), unit: u.name }
}

/** "2 days", "1 hour". */
export function spell(s: number) {
  const { amount, unit } = splitSeconds(s)
  return `${amount} ${Number(amount) === 1 ? unit.slice(0, -1) : unit}`
}

/** The seconds an amount and unit stand for; null for an empty amount. */
export const toSeconds = (amount: string, unit: Unit) =>
  amount.trim() === '' ? null : Math.round(Number(amount) * UNITS.find((u) => u.name === unit)!.seconds)

export const releaseInWords = (s: number | null) => (s === null ? 'Kept until released' : `Released after ${spell(s)}`)
export const graceInWords = (s: number) => (s === 0 ? 'None' : spell(s))
export const afterExpiryInWords = (v: 'refuse' | 'keep') => (v === 'keep' ? 'Keeps working (marked expired)' : 'Refused')
export const limitInWords = (n: number | null) => (n === null ? 'No limit' : `${n} allowed`)

/** A setting's integer range, as the table declares it (core/key-settings.ts): the forms check what the API checks. */
function range(field: 'activation_limit' | 'release_after_seconds' | 'deactivations_allowed' | 'grace_seconds'): { min: number; max: number } {
  const form = KEY_SETTINGS.find((s) => s.field === field)!.form
  if (form.type !== 'integer') throw new Error(`${field} is not an integer setting`)
  return form
}
const within = (n: number | null, r: { min: number; max: number }) => n !== null && Number.isInteger(n) && n >= r.min && n <= r.max

/**
 * The checks the API makes on these settings, in words a vendor reads (the API's own message for a
 * number or null names no range): each returns a field error or null. The ranges are the table's.
 */
export const checks = {
  limit(text: string, field: string): FieldError | null {
    const r = range('activation_limit')
    return text.trim() !== '' && within(Number(text), r) ? null : { field, message: `A whole number from ${r.min} to ${r.max}.` }
  },
  release(seconds: number | null, field: string): FieldError | null {
    const r = range('release_after_seconds')
    return seconds === null || within(seconds, r) ? null : { field, message: `From ${spell(r.min)} to ${spell(r.max)}, or empty for never.` }
  },
  deactivations(allowed: number | null, field: string): FieldError | null {
    const r = range('deactivations_allowed')
    return allowed === null || within(allowed, r) ? null : { field, message: `A whole number from ${r.min} to ${r.max}, or empty for unlimited.` }
  },
  grace(seconds: number | null, field: string): FieldError | null {
    const r = range('grace_seconds')
    return seconds === null || within(seconds, r) ? null : { field, message: `From ${r.min} to ${spell(r.max)}.` }
  },
}

const PARTS: [keyof Period, string][] = [
  ['years', 'year'],
  ['months', 'month'],
  ['weeks', 'week'],
  ['days', 'day'],
  ['hours', 'hour'],
  ['minutes', 'minute'],
]

/** `P1Y6M` → "1 year 6 months"; null → "Perpetual". */
export function termInWords(duration: string | null) {
  if (duration === null) return 'Perpetual'
  const p = parsePeriod(duration)
  if (typeof p === 'string') return duration
  return PARTS.filter(([k]) => p[k] > 0).map(([k, word]) => `${p[k]} ${p[k] === 1 ? word : word + 's'}`).join(' ')
}

// The contract's rules for the values that cross it: input timestamps, output timestamps, metadata.
// Shared by the services (which check and store) and the repos (which turn rows into answers).
import { invalid } from './errors'

/**
 * Parses an input timestamp that already matched the `Instant` schema. Every component is range-checked,
 * so an impossible date (February 31st, 24:00, +25:00) is 400 instead of being rolled over by `Date`.
 */
export function parseInstant(field: string, text: string): Date {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2}))$/.exec(text)
  const [y, mo, d, h, mi, s, oh, om] = (m ?? []).slice(1).map((v) => (v === undefined ? 0 : Number(v)))
  const valid =
    m !== null && y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 && d <= new Date(Date.UTC(y, mo, 0)).getUTCDate() &&
    h <= 23 && mi <= 59 && s <= 59 && oh <= 23 && om <= 59
  const date = new Date(text)
  if (!valid || Number.isNaN(date.getTime())) throw invalid(field, 'must be a valid ISO 8601 timestamp with a zone')
  return date
}

export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null)

/** An API object `T` as a row comes from Postgres: its timestamp fields `K` are Dates (null stays null). */
export type Dated<T, K extends keyof T> = { [P in keyof T]: P extends K ? (null extends T[P] ? Date | null : Date) : T[P] }

/**
 * A row whose columns are the API object's fields, to the object: its timestamp fields `dates` as ISO
 * 8601 text, every other column as it is (so the query's column list is the object's, in its order).
 */
export function isoDates<T, K extends keyof T>(row: Dated<T, K>, dates: readonly K[]): T {
  const out = { ...row } as Record<keyof T, unknown>
  for (const k of dates) out[k] = iso(row[k] as Date | null)
  return out as T
}

/** `metadata`: a JSON object of at most 8 KiB serialized. */
export function checkMetadata(field: string, value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(field, 'must be a JSON object')
  if (Buffer.byteLength(JSON.stringify(value)) > 8192) throw invalid(field, 'must be at most 8 KiB serialized')
  return value as Record<string, unknown>
}

// The outcomes lists live in their own import-free file (the console bundles it); named here too.
export { REFUSAL_REASONS, VALIDATE_OUTCOMES, type RefusalReason, type ValidateOutcome } from './outcomes'

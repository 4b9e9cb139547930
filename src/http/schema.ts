// Schema building blocks shared by the modules' models.
// Bodies use plain TypeBox (strict: "5" is not an integer); query strings use Elysia's `t`, which
// coerces numeric strings. Both are TypeBox, so every schema is also the OpenAPI document.
import { Type } from '@sinclair/typebox'
import { t as elysiaT } from 'elysia'
import { invalid } from './errors'

export const t = Type
export const q = elysiaT

/** ISO 8601 with a zone (`Z` or `±hh:mm`); anything else is 400. */
export const Instant = (description?: string) =>
  Type.String({
    pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:\\d{2})$',
    description: description ?? 'ISO 8601 timestamp with a zone, e.g. 2026-11-22T10:00:00.000Z',
  })

export const Timestamp = Type.String({ format: 'date-time', examples: ['2026-11-22T10:00:00.000Z'] })
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()])

/**
 * Parses an input timestamp that already matched `Instant`. Every component is range-checked, so an
 * impossible date (February 31st, 24:00, +25:00) is 400 instead of being rolled over by `Date`.
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

/** `metadata`: a JSON object of at most 8 KiB serialized. */
export function checkMetadata(field: string, value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(field, 'must be a JSON object')
  if (Buffer.byteLength(JSON.stringify(value)) > 8192) throw invalid(field, 'must be at most 8 KiB serialized')
  return value as Record<string, unknown>
}

/** A string enum as a union of literals (the static type keeps the literals). */
export const OneOf = <const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>(Type.Union(values.map((v) => Type.Literal(v)), options))

export const IdParam = (name = 'id') => Type.Object({ [name]: Type.String() })

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String(),
    request_id: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
    retry_after: Type.Optional(Type.Integer()),
  },
  { description: 'RFC 9457 problem document (application/problem+json)' },
)

// Schema building blocks shared by the modules' models.
// Bodies use plain TypeBox (strict: "5" is not an integer); query strings use Elysia's `t`, which
// coerces numeric strings. Both are TypeBox, so every schema is also the OpenAPI document.
import { Type } from '@sinclair/typebox'
import { t as elysiaT } from 'elysia'

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
    rows: Type.Optional(
      Type.Array(
        Type.Object({
          line: Type.Integer({ description: 'The line an editor shows: NDJSON from 1, a CSV\'s first row is 2 (after its header), JSON rows[i] is i + 1' }),
          external_id: Type.Union([Type.String(), Type.Null()]),
          errors: Type.Array(Type.Object({ field: Type.String(), message: Type.String() })),
        }),
        { description: 'import_invalid only: every bad row of the import' },
      ),
    ),
  },
  { description: 'RFC 9457 problem document (application/problem+json)' },
)

// ---- Text a person or a terminal reads back (names, labels, versions) --------------------------------
/**
 * `min..max` Unicode code points, none a control character (C0, DEL, C1: ESC, CR, LF and the like
 * would be interpreted by a terminal showing a log or a listing). The pattern counts a surrogate pair as
 * one code point and refuses a lone surrogate (not storable as UTF-8) and U+FFFD (what the validate fast
 * path's JSON reader makes of invalid UTF-8), so both doors refuse the same text without a `u` flag.
 */
export const PlainText = (min: number, max: number, options: Record<string, unknown> = {}) =>
  Type.String({
    ...options,
    pattern: `^(?:[^\\u0000-\\u001F\\u007F-\\u009F\\uD800-\\uDFFF\\uFFFD]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]){${min},${max}}$`,
  })

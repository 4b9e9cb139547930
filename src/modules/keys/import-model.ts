// The shapes of the key import and export (docs/api.md, "Import and export"). An import row is checked field by field in
// import-rows.ts (every bad row is reported at once, by line), so the body schema only says where the
// rows are; the row's fields are documented here and in docs/api.md.
import { OneOf, q, t } from '../../http/schema'
import { KEY_PREFIX_PATTERN } from './model'

export const ImportQuery = q.Object({
  dry_run: q.Optional(q.Boolean({ default: false, description: 'Check every row and answer what would happen; nothing is written' })),
})

export const ImportBody = t.Union(
  [
    t.Object(
      {
        rows: t.Array(t.Unknown(), {
          description:
            'At most 10,000 rows. A row: exactly one of key (the value as customers have it), key_sha256 (64 hex: SHA-256 of it) or key_hash ' +
            '(a Keyward export\'s); one of product_id, product_slug or policy_id; optional external_id (1..200), plan, activation_limit, ' +
            'expires_at (past allowed), status (active, revoked, suspended), metadata, entitlements, created_at (past), activations ' +
            '[{device_fingerprint, device_name?, app_version?, activated_at?}], and the settings an export writes',
        }),
      },
      { description: 'application/json' },
    ),
    t.String({ description: 'application/x-ndjson (one row per line) or text/csv (a header row; metadata, entitlements, credits and activations cells hold JSON)' }),
  ],
  {
    description: 'At most 8 MiB',
    // Elysia's validation error serialises the whole rejected value into its message unless the
    // failing schema names its own: 8 MiB of array cost over a second of event loop (docs/decisions.md, "Requests").
    error: 'must be {"rows": [...]} (application/json), NDJSON or CSV text',
  },
)

export const ImportAnswer = t.Object({
  created: t.Integer(),
  skipped: t.Integer({ description: 'Rows whose external_id the account already has (a re-run skips what it imported)' }),
  keys: t.Array(t.Object({ line: t.Integer(), id: t.String(), external_id: t.Union([t.String(), t.Null()]) }), {
    description: 'The keys created, in file order, with the line of their row',
  }),
})
export type ImportAnswer = typeof ImportAnswer.static

export const DryRunAnswer = t.Object({
  dry_run: t.Literal(true),
  would_create: t.Integer(),
  would_skip: t.Integer(),
})
export type DryRunAnswer = typeof DryRunAnswer.static

export const ExportQuery = q.Object({
  format: q.Optional(OneOf(['ndjson', 'csv'] as const, { default: 'ndjson', description: 'ndjson (with each key\'s activations) or csv' })),
  product_id: q.Optional(q.String()),
  policy_id: q.Optional(q.String()),
  key_prefix: q.Optional(q.String({ pattern: KEY_PREFIX_PATTERN, description: 'Only keys whose value starts with these 1 to 5 characters (as the list)' })),
  q: q.Optional(q.String({ minLength: 1, maxLength: 200, description: 'Only the keys the list\'s search q finds (ids, key start, customer e-mail or name)' })),
  status: q.Optional(
    q.Union([q.Literal('active'), q.Literal('revoked'), q.Literal('suspended'), q.Literal('expired')], { description: 'Effective status' }),
  ),
})
export type ExportQuery = typeof ExportQuery.static

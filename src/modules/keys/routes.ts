import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, IDEMPOTENT, problems, TEXT_TYPES_MARK, ANSWER_HEADERS_MARK, withBody } from '../../http/responses'
import { IdParam } from '../../http/schema'
import { CreatedKey, CreateKeyBody, ExtendBody, Key, KeyDetail, KeyPage, ListKeysQuery, PatchKeyBody, RevokeBody, SuspendBody } from './model'
import * as service from './service'
import { invalid } from '../../core/errors'
import { formatOf } from './import-parse'
import { DryRunAnswer, ExportQuery, ImportAnswer, ImportBody, ImportQuery } from './import-model'
import { exportKeys } from './export-service'
import { t } from '../../http/schema'
import { importKeys } from './import-service'
import { byApiKey } from '../events/outbox'

export function keyRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.keys', prefix: '/v1/keys', detail: { tags: ['License keys'] } })
    .use(authPlugin(deps.principals))
    .guard({ response: behindAuth() })
    .post(
      '',
      (ctx) =>
        createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/keys', (record) =>
          service.createKey(deps, ctx.principal, ctx.body, record),
          { secretKey: deps.secretKey }, // the stored replay holds the key value: sealed at rest
        ),
      {
        auth: 'keys:write',
        body: CreateKeyBody,
        response: { 201: CreatedKey, ...withBody(), ...problems(404, 409) },
        detail: { summary: 'Create a license key (key_value is shown once; emits key.created)', ...IDEMPOTENT },
      },
    )
    .get('', ({ principal, query }) => service.listKeys(deps, principal, query), {
      auth: 'keys:read',
      query: ListKeysQuery,
      response: { 200: KeyPage },
      detail: { summary: 'List keys, newest first, filtered and paged' },
    })
    .post(
      '/import',
      (ctx) => {
        const format = formatOf(ctx.headers['content-type'])
        if (format === null) throw invalid('header.content-type', 'must be application/json, application/x-ndjson or text/csv')
        const input = { format, body: ctx.body, dryRun: ctx.query.dry_run === true }
        const who = { accountId: ctx.principal.accountId, actor: byApiKey(ctx.principal) }
        if (input.dryRun) return importKeys(deps, who, input)
        return createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/keys/import', (record) =>
          importKeys(deps, who, input, record),
        ) as Promise<ImportAnswer>
      },
      {
        auth: 'keys:write',
        query: ImportQuery,
        body: ImportBody,
        response: { 200: DryRunAnswer, 201: ImportAnswer, ...withBody(), ...problems(409, 422) },
        detail: {
          summary: 'Import keys from another system: all rows or none (emits one keys.imported)',
          description:
            'JSON {rows}, NDJSON (application/x-ndjson) or CSV (text/csv), at most 10,000 rows and 8 MiB. Any bad row: 422 import_invalid ' +
            'listing every bad row by line and field, nothing written. Rows whose external_id exists are skipped. ?dry_run=true answers 200 ' +
            'with what would happen.',
          ...IDEMPOTENT,
        },
      },
    )
    .get(
      '/export',
      ({ principal, query }) => {
        const csv = query.format === 'csv'
        const name = `keys-${new Date().toISOString().slice(0, 10)}.${csv ? 'csv' : 'ndjson'}`
        return new Response(exportKeys(deps, principal, query), {
          headers: {
            'content-type': csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson',
            'content-disposition': `attachment; filename="${name}"`,
            'cache-control': 'no-store',
          },
        })
      },
      {
        auth: 'keys:read',
        query: ExportQuery,
        response: {
          200: t.String({
            [TEXT_TYPES_MARK]: ['application/x-ndjson', 'text/csv'],
            [ANSWER_HEADERS_MARK]: {
              'Content-Type': {
                description: 'application/x-ndjson, or text/csv; charset=utf-8 with format=csv',
                schema: { type: 'string', enum: ['application/x-ndjson', 'text/csv; charset=utf-8'] },
              },
              'Content-Disposition': {
                description: 'A download named for the day (UTC): attachment; filename="keys-2026-11-28.ndjson" (.csv with format=csv)',
                schema: { type: 'string', pattern: '^attachment; filename="keys-\\d{4}-\\d{2}-\\d{2}\\.(ndjson|csv)"$' },
              },
              'Cache-Control': { description: 'no-store: the export holds key hashes, no cache keeps it', schema: { type: 'string', enum: ['no-store'] } },
            },
            description:
              'Streamed. NDJSON: one key per line, with product_slug, key_hash (or key_sha256 for a hash-only import not validated yet) ' +
              'and its active devices as activations. CSV: a header row and the same fields but activations (metadata, entitlements, ' +
              'overrides hold JSON). Every row imports as it is into POST /v1/keys/import.',
          }),
        },
        detail: { summary: 'Export keys, filtered as the list (oldest first), to move them to another installation' },
      },
    )
    .guard({ params: IdParam(), response: problems(404) }, (byId) =>
      byId
        .get('/:id', ({ principal, params }) => service.getKey(deps, principal, params.id), {
          auth: 'keys:read',
          response: { 200: KeyDetail },
          detail: { summary: 'A key with its full activation history, oldest first' },
        })
        .patch('/:id', ({ principal, params, body }) => service.patchKey(deps, principal, params.id, body), {
          auth: 'keys:write',
          body: PatchKeyBody,
          response: { 200: Key, ...withBody() },
          detail: {
            summary: 'Change a key\'s settings, at once on every node (emits key.updated when a value changed)',
            description: 'Omitted fields keep their value; metadata replaces the whole object; a revoked key stays revoked.',
          },
        })
        .post('/:id/revoke', ({ principal, params, body }) => service.revokeKey(deps, principal, params.id, body?.reason ?? null), {
          auth: 'keys:revoke',
          body: RevokeBody,
          response: { 200: Key, ...withBody() },
          detail: { summary: 'Revoke a key, final and at once on every node (emits key.revoked)' },
        })
        .post('/:id/extend', ({ principal, params, body }) => service.extendKey(deps, principal, params.id, body.expires_at), {
          auth: 'keys:write',
          body: ExtendBody,
          response: { 200: Key, ...withBody(), ...problems(409) },
          detail: { summary: 'Set a new expiry or make the key perpetual (emits key.extended)' },
        })
        .post('/:id/suspend', ({ principal, params, body }) => service.suspendKey(deps, principal, params.id, body ?? {}), {
          auth: 'keys:revoke',
          body: SuspendBody,
          response: { 200: Key, ...withBody(), ...problems(409) },
          detail: {
            summary: 'Suspend a key, at once on every node (emits key.suspended)',
            description:
              'Validate answers suspended until the key is reinstated, by a call or by the system at `until`. ' +
              'Suspending a suspended key replaces its reason and until (omitted = null). A revoked key is 409 key_revoked.',
          },
        })
        .post('/:id/reinstate', ({ principal, params }) => service.reinstateKey(deps, principal, params.id), {
          auth: 'keys:revoke',
          response: { 200: Key, ...withBody() },
          detail: { summary: 'End a suspension, at once on every node (emits key.reinstated; a key not suspended is returned unchanged)' },
        })
        .post('/:id/reissue', ({ principal, params }) => service.reissueKey(deps, principal, params.id), {
          auth: 'keys:write',
          response: { 200: CreatedKey, ...withBody(), ...problems(409) },
          detail: {
            summary: 'Give a key a new value (shown once; emits key.reissued)',
            description:
              'The old value answers not_found on every node before this returns; devices, offline licenses and history stay with the key. A revoked key is 409 key_revoked.',
          },
        }),
    )
}

import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, IDEMPOTENT, problems, withBody } from '../../http/responses'
import { IdParam } from '../../http/schema'
import { CreatedKey, CreateKeyBody, ExtendBody, Key, KeyDetail, KeyPage, ListKeysQuery, PatchKeyBody, RevokeBody, SuspendBody } from './model'
import { adjustCredits } from './credits'
import { CreditsBody } from './credits-model'
import * as service from './service'

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
        .post('/:id/credits', ({ principal, params, body }) => adjustCredits(deps, principal, params.id, body), {
          auth: 'keys:write',
          body: CreditsBody,
          response: { 200: Key, ...withBody(), ...problems(409) },
          detail: {
            summary: "Add to, subtract from or set a metered key's credits, at once on every node (emits key.credits_updated)",
            description:
              'subtract stops at 0; amount 0..10^12 (at least 1 to add or subtract, else 400). Refills due are applied first. ' +
              'An unmetered key (credits null) is 409 key_unmetered.',
          },
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

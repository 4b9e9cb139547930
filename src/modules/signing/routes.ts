import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, CLIENT, IDEMPOTENT, problems, withBody } from '../../http/responses'
import { CreateSigningKeyBody, KeySet, KidParam, RevokeSigningKeyBody, SigningKey } from './model'
import * as service from './service'
import type { Signers } from './signers'

export function signingRoutes(deps: Deps, signers: Signers) {
  return new Elysia({ name: 'keyward.signing', prefix: '/v1', detail: { tags: ['Signing keys'] } })
    .use(authPlugin(deps.principals))
    .get('/signing-keys', ({ principal }) => service.keySet(deps, signers, principal.accountId), {
      auth: 'any',
      // Any scope passes, so no 403.
      response: { 200: KeySet, ...problems(400, 401, 503) },
      detail: { summary: 'The key set: the root, every signing key and its state, signed by the root' },
    })
    .get('/offline/keys', ({ principal }) => service.keySet(deps, signers, principal.accountId), {
      auth: 'any',
      response: { 200: KeySet, ...problems(400, 401, 503) },
      detail: {
        summary: 'The key set for apps (the same body as GET /v1/signing-keys): verify it with the pinned root',
        description: 'Apps refresh it to learn new signing keys and revocations. CORS: callable from any origin.',
        ...CLIENT,
      },
    })
    .guard({ auth: 'full_access', response: behindAuth() }, (keys) =>
      keys
        .post(
          '/signing-keys',
          (ctx) =>
            createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/signing-keys', (record) =>
              service.createSigningKey(deps, signers, ctx.principal, ctx.body, record),
            ),
          {
            body: CreateSigningKeyBody,
            response: { 201: SigningKey, ...withBody(), ...problems(409) },
            detail: {
              summary: 'Create a signing key (pending, with its certificate); activate_at schedules its activation on every node',
              description: 'At most 16 keys that are not revoked: a 17th is 409 signing_key_limit. An activate_at not in the future is 400.',
              ...IDEMPOTENT,
            },
          },
        )
        .guard({ params: KidParam, response: problems(404) }, (byKid) =>
          byKid
            .post('/signing-keys/:kid/activate', ({ principal, params }) => service.activateSigningKey(deps, signers, principal, params.kid), {
              // No body is read, but one over the size limit is refused before routing.
              response: { 200: SigningKey, ...problems(409, 413) },
              detail: {
                summary: 'Make it the active key: when this returns, every node signs with it (the previous one retires)',
                description: 'Already active: no change. Retired: active again. Revoked: 409 signing_key_revoked.',
              },
            })
            .post(
              '/signing-keys/:kid/revoke',
              ({ principal, params, body }) => service.revokeSigningKey(deps, signers, principal, params.kid, body.reason ?? null),
              {
                body: RevokeSigningKeyBody,
                response: { 200: SigningKey, ...withBody() },
                detail: {
                  summary: 'Revoke: it signs no more and apps refuse it; the root signs until another key is activated',
                  description: 'Already revoked: no change. Licenses it signed are renewed by sync, signed by the current signer.',
                },
              },
            ),
        ),
    )
}

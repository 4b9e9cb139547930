import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { IdParam, Problem } from '../../http/schema'
import { IssuedLicense, IssueLicenseBody, PublicKey, SyncBody, SyncResponse } from './model'
import * as service from './service'
import { Signers } from './signing-keys'

export function offlineRoutes(deps: Deps) {
  const signers = new Signers(deps.sql, deps.secretKey)
  return new Elysia({ name: 'keyward.offline', prefix: '/v1', detail: { tags: ['Offline licenses'] } })
    .use(authPlugin(deps.principals))
    .get('/offline/public-key', ({ principal }) => service.publicKey(signers, principal.accountId), {
      auth: 'any',
      response: { 200: PublicKey, 401: Problem },
      detail: { summary: "The account's Ed25519 public key, to verify offline licenses" },
    })
    .post(
      '/keys/:id/offline-licenses',
      (ctx) =>
        // The key id is part of the request: the same Idempotency-Key and body for another key is a new request.
        createOnce(ctx, deps.sql, ctx.principal.accountId, `POST /v1/keys/${ctx.params.id}/offline-licenses`, (record) =>
          service.issueLicense(deps, signers, ctx.principal, ctx.params.id, ctx.body, record),
        ),
      {
        auth: 'offline:write',
        params: IdParam(),
        body: IssueLicenseBody,
        response: { 201: IssuedLicense, 400: Problem, 401: Problem, 403: Problem, 404: Problem, 409: Problem },
        detail: { summary: 'Issue a signed offline license; the device takes an activation slot' },
      },
    )
    .post('/offline-licenses/sync', ({ principal, body }) => service.syncLicenses(deps, signers, principal, body.licenses), {
      auth: 'offline:write',
      body: SyncBody,
      response: { 200: SyncResponse, 400: Problem, 401: Problem, 403: Problem },
      detail: { summary: 'Check licenses brought back by devices; renew the valid ones' },
    })
}

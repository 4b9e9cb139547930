import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, CLIENT, IDEMPOTENT, problems, withBody } from '../../http/responses'
import { IdParam } from '../../http/schema'
import { IssuedLicense, IssueLicenseBody, PublicKey, SyncBody, SyncResponse } from './model'
import * as service from './service'
import type { Signers } from '../signing/signers'

export function offlineRoutes(deps: Deps, signers: Signers) {
  return new Elysia({ name: 'keyward.offline', prefix: '/v1', detail: { tags: ['Offline licenses'] } })
    .use(authPlugin(deps.principals))
    .get('/offline/public-key', ({ principal }) => service.publicKey(signers, principal.accountId), {
      auth: 'any',
      // Any scope passes, so no 403.
      response: { 200: PublicKey, ...problems(400, 401, 503) },
      detail: {
        summary: "The account's root Ed25519 public key: the one apps pin",
        description:
          'The root signs the certificates of the signing keys (GET /v1/offline/keys) and signs answers and licenses itself while no signing key is active. CORS: callable from any origin.',
        ...CLIENT,
      },
    })
    .guard({ auth: 'offline:write', response: { ...behindAuth(), ...withBody() } }, (offline) =>
      offline
        .post(
          '/keys/:id/offline-licenses',
          (ctx) =>
            // The key id is part of the request: the same Idempotency-Key and body for another key is a new request.
            createOnce(ctx, deps.sql, ctx.principal.accountId, `POST /v1/keys/${ctx.params.id}/offline-licenses`, (record) =>
              service.issueLicense(deps, signers, ctx.principal, ctx.params.id, ctx.body, record),
            ),
          {
            params: IdParam(),
            body: IssueLicenseBody,
            response: { 201: IssuedLicense, ...problems(404, 409) },
            detail: { summary: 'Issue a signed offline license; the device takes an activation slot', ...IDEMPOTENT },
          },
        )
        .post('/offline-licenses/sync', ({ principal, body }) => service.syncLicenses(deps, signers, principal, body.licenses), {
          body: SyncBody,
          response: { 200: SyncResponse },
          detail: { summary: 'Check licenses brought back by devices; renew the valid ones' },
        }),
    )
}

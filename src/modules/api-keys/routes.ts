import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, IDEMPOTENT, problems, withBody, noContent } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
import { ApiKey, ApiKeyList, ApiKeyWithToken, CreateApiKeyBody } from './model'
import { byApiKey } from '../events/outbox'
import * as service from './service'

export function apiKeyRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.api-keys', prefix: '/v1' })
    .use(authPlugin(deps.principals))
    .get('/ping', async ({ principal }) => ({ status: 'ok' as const, accountId: principal.accountId, accountName: await service.accountName(deps.sql, principal.accountId) }), {
      auth: 'any',
      // Any scope passes, so no 403.
      response: {
        200: t.Object({ status: t.Literal('ok'), accountId: t.String(), accountName: t.String({ description: 'The account’s name (the console’s top bar shows it)' }) }),
        ...problems(400, 401, 503),
      },
      detail: { tags: ['Account'], summary: 'Check the API key and see its account' },
    })
    .guard({ auth: 'full_access', response: behindAuth(), detail: { tags: ['API keys'] } }, (keys) =>
      keys
        .post(
          '/api-keys',
          (ctx) =>
            createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/api-keys', (record) =>
              service.createApiKey(deps.sql, ctx.principal.accountId, ctx.body, record, byApiKey(ctx.principal)),
              { secretKey: deps.secretKey }, // the stored replay holds the token: sealed at rest
            ),
          {
            body: CreateApiKeyBody,
            response: { 201: ApiKeyWithToken, ...withBody(), ...problems(409) },
            detail: { summary: 'Create an API key (the token is shown once)', ...IDEMPOTENT },
          },
        )
        .get('/api-keys', async ({ principal }) => ({ data: await service.listApiKeys(deps, principal.accountId) }), {
          response: { 200: ApiKeyList },
          detail: { summary: 'List API keys (without tokens)' },
        })
        .guard({ params: IdParam(), response: problems(404) }, (byId) =>
          byId
            .post('/api-keys/:id/rotate', ({ principal, params }) => service.rotateApiKey(deps, principal.accountId, params.id, byApiKey(principal)), {
              // No body is read, but one over the size limit is refused before routing.
              response: { 200: ApiKeyWithToken, ...problems(413) },
              detail: { summary: 'Rotate: a new token; the old one stops working at once' },
            })
            .delete(
              '/api-keys/:id',
              ({ principal, params, set }) => noContent(set, service.deleteApiKey(deps, principal.accountId, params.id, byApiKey(principal))),
              {
                response: { 204: t.Void(), ...problems(409) },
                detail: { summary: "Delete an API key; refused on every node within 1 s. The account's last full_access key is 409 last_full_access_key" },
              },
            ),
        ),
    )
}
export { ApiKey }

import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { IdParam, Problem, t } from '../../http/schema'
import { ApiKey, ApiKeyList, ApiKeyWithToken, CreateApiKeyBody } from './model'
import * as service from './service'

export function apiKeyRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.api-keys', prefix: '/v1' })
    .use(authPlugin(deps.principals))
    .get('/ping', ({ principal }) => ({ status: 'ok', accountId: principal.accountId }), {
      auth: 'any',
      response: { 200: t.Object({ status: t.Literal('ok'), accountId: t.String() }), 401: Problem },
      detail: { tags: ['Account'], summary: 'Check the API key and see its account' },
    })
    .post(
      '/api-keys',
      (ctx) =>
        createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/api-keys', (record) =>
          service.createApiKey(deps.sql, ctx.principal.accountId, ctx.body, record),
          { secretKey: deps.secretKey }, // the stored replay holds the token: sealed at rest
        ),
      {
        auth: 'full_access',
        body: CreateApiKeyBody,
        response: { 201: ApiKeyWithToken, 400: Problem, 401: Problem, 403: Problem, 409: Problem },
        detail: { tags: ['API keys'], summary: 'Create an API key (the token is shown once)' },
      },
    )
    .get('/api-keys', async ({ principal }) => ({ data: await service.listApiKeys(deps, principal.accountId) }), {
      auth: 'full_access',
      response: { 200: ApiKeyList, 401: Problem, 403: Problem },
      detail: { tags: ['API keys'], summary: 'List API keys (without tokens)' },
    })
    .post('/api-keys/:id/rotate', ({ principal, params }) => service.rotateApiKey(deps, principal.accountId, params.id), {
      auth: 'full_access',
      params: IdParam(),
      response: { 200: ApiKeyWithToken, 401: Problem, 403: Problem, 404: Problem },
      detail: { tags: ['API keys'], summary: 'Rotate: a new token; the old one stops working at once' },
    })
    .delete(
      '/api-keys/:id',
      async ({ principal, params, set }) => {
        await service.deleteApiKey(deps, principal.accountId, params.id)
        set.status = 204
      },
      {
        auth: 'full_access',
        params: IdParam(),
        response: { 204: t.Void(), 401: Problem, 403: Problem, 404: Problem, 409: Problem },
        detail: {
          tags: ['API keys'],
          summary: 'Delete an API key; refused on every node within 1 s. The last full_access key cannot be deleted (409)',
        },
      },
    )
}
export { ApiKey }

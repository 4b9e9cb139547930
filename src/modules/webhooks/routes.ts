import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { IdParam, Problem, t } from '../../http/schema'
import { CreateWebhookBody, TestResult, UpdateWebhookBody, Webhook, WebhookDetail, WebhookList, WebhookWithSecret } from './model'
import * as service from './service'

export function webhookRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.webhooks', prefix: '/v1/webhooks', detail: { tags: ['Webhooks'] } })
    .use(authPlugin(deps.principals))
    .post(
      '/',
      async (ctx) => {
        const stored = await createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/webhooks', (record) =>
          service.createWebhook(deps, ctx.principal, ctx.body, record),
        )
        return service.revealSecret(deps, stored as Parameters<typeof service.revealSecret>[1])
      },
      {
        auth: 'full_access',
        body: CreateWebhookBody,
        response: { 201: WebhookWithSecret, 400: Problem, 401: Problem, 402: Problem, 403: Problem, 409: Problem },
        detail: { summary: 'Create a webhook (the signing secret is shown once)' },
      },
    )
    .get('/', async ({ principal }) => ({ data: await service.listWebhooks(deps, principal) }), {
      auth: 'full_access',
      response: { 200: WebhookList, 401: Problem, 403: Problem },
      detail: { summary: 'List webhooks, oldest first (without secrets)' },
    })
    .get('/:id', ({ principal, params }) => service.getWebhook(deps, principal, params.id), {
      auth: 'full_access',
      params: IdParam(),
      response: { 200: WebhookDetail, 401: Problem, 403: Problem, 404: Problem },
      detail: { summary: 'A webhook with its last 20 delivery attempts, newest first' },
    })
    .patch('/:id', ({ principal, params, body }) => service.updateWebhook(deps, principal, params.id, body), {
      auth: 'full_access',
      params: IdParam(),
      body: UpdateWebhookBody,
      response: { 200: Webhook, 400: Problem, 401: Problem, 403: Problem, 404: Problem },
      detail: { summary: 'Change the url, events or is_active (deactivating cancels pending deliveries)' },
    })
    .delete(
      '/:id',
      async ({ principal, params, set }) => {
        await service.deleteWebhook(deps, principal, params.id)
        set.status = 204
      },
      {
        auth: 'full_access',
        params: IdParam(),
        response: { 204: t.Void(), 401: Problem, 403: Problem, 404: Problem },
        detail: { summary: 'Delete a webhook; its pending deliveries are dropped' },
      },
    )
    .post('/:id/test', ({ principal, params }) => service.testWebhook(deps, principal, params.id), {
      auth: 'full_access',
      params: IdParam(),
      response: { 200: TestResult, 401: Problem, 403: Problem, 404: Problem },
      detail: { summary: 'Send a sample key.created event now and return the logged attempt' },
    })
}

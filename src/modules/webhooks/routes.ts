import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, IDEMPOTENT, problems, withBody, noContent } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
import { CreateWebhookBody, TestResult, UpdateWebhookBody, Webhook, WebhookDetail, WebhookList, WebhookWithSecret } from './model'
import * as service from './service'

export function webhookRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.webhooks', prefix: '/v1/webhooks', detail: { tags: ['Webhooks'] } })
    .use(authPlugin(deps.principals))
    .guard({ auth: 'full_access', response: behindAuth() }, (hooks) =>
      hooks
        .post(
          '/',
          async (ctx) => {
            const stored = await createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/webhooks', (record) =>
              service.createWebhook(deps, ctx.principal, ctx.body, record),
            )
            return service.revealSecret(deps, stored as Parameters<typeof service.revealSecret>[1])
          },
          {
            body: CreateWebhookBody,
            response: { 201: WebhookWithSecret, ...withBody(), ...problems(402, 409) },
            detail: { summary: 'Create a webhook (the signing secret is shown once)', ...IDEMPOTENT },
          },
        )
        .get('/', async ({ principal }) => ({ data: await service.listWebhooks(deps, principal) }), {
          response: { 200: WebhookList },
          detail: { summary: 'List webhooks, oldest first (without secrets)' },
        })
        .guard({ params: IdParam(), response: problems(404) }, (byId) =>
          byId
            .get('/:id', ({ principal, params }) => service.getWebhook(deps, principal, params.id), {
              response: { 200: WebhookDetail },
              detail: { summary: 'A webhook with its last 20 delivery attempts, newest first' },
            })
            .patch('/:id', ({ principal, params, body }) => service.updateWebhook(deps, principal, params.id, body), {
              body: UpdateWebhookBody,
              response: { 200: Webhook, ...withBody() },
              detail: { summary: 'Change the url, events or is_active (deactivating cancels pending deliveries)' },
            })
            .delete(
              '/:id',
              ({ principal, params, set }) => noContent(set, service.deleteWebhook(deps, principal, params.id)),
              {
                response: { 204: t.Void() },
                detail: { summary: 'Delete a webhook; its pending deliveries are dropped' },
              },
            )
            .post('/:id/test', ({ principal, params }) => service.testWebhook(deps, principal, params.id), {
              // No body is read, but one over the size limit is refused before routing.
              response: { 200: TestResult, ...problems(413) },
              detail: { summary: 'Send a sample key.created event now and return the logged attempt' },
            }),
        ),
    )
}

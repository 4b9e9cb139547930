import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth, problems, withBody, noContent } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
import { Connector, ConnectorDetail, ConnectorList, CreateConnectorBody, HookAnswer, PatchConnectorBody } from './model'
import * as service from './service'

/** The inbound endpoint's body limit; its body reaches the route as raw bytes (app.ts, kernel). */
export const HOOK_BODY_LIMIT = 1024 * 1024
export const HOOK_PREFIX = '/hooks/'

export function connectorRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.connectors', prefix: '/v1/connectors', detail: { tags: ['Payments'] } })
    .use(authPlugin(deps.principals))
    .guard({ auth: 'full_access', response: behindAuth() }, (hooks) =>
      hooks
        .post(
          '/',
          async ({ principal, body, set }) => {
            set.status = 201
            return service.createConnector(deps, principal, body)
          },
          {
            body: CreateConnectorBody,
            response: { 201: Connector, ...withBody() },
            detail: { summary: "Create a payment connector (the provider's signing secret is write-only)" },
          },
        )
        .get('/', async ({ principal }) => ({ data: await service.listConnectors(deps, principal), mail_enabled: service.mailEnabled(deps) }), {
          response: { 200: ConnectorList },
          detail: { summary: 'List payment connectors, oldest first' },
        })
        .guard({ params: IdParam(), response: problems(404) }, (byId) =>
          byId
            .get('/:id', ({ principal, params }) => service.getConnector(deps, principal, params.id), {
              response: { 200: ConnectorDetail },
              detail: { summary: 'A connector with its last 50 received events (with outcome) and key emails' },
            })
            .patch('/:id', ({ principal, params, body }) => service.updateConnector(deps, principal, params.id, body), {
              body: PatchConnectorBody,
              response: { 200: Connector, ...withBody() },
              detail: { summary: 'Change the name, signing secret, mappings or email_keys' },
            })
            .delete(
              '/:id',
              ({ principal, params, set }) => noContent(set, service.deleteConnector(deps, principal, params.id)),
              { response: { 204: t.Void() }, detail: { summary: 'Delete a connector (the keys it issued stay)' } },
            ),
        ),
    )
}

/** `POST /hooks/:connector_id`: the provider's webhook as sent, no Authorization; its signature is the credential. */
export function hookRoutes(deps: Deps, wakeMailer: () => void) {
  return new Elysia({ name: 'keyward.hooks', detail: { tags: ['Payments'] } }).post(
    '/hooks/:connector_id',
    ({ params, body, request, server }) =>
      service.receiveHook(deps, params.connector_id, body as Uint8Array, request.headers, server?.requestIP(request)?.address ?? null, wakeMailer),
    {
      params: t.Object({ connector_id: t.String() }),
      response: { 200: HookAnswer, ...problems(400, 413, 429, 503) },
      detail: {
        summary: "A payment provider's webhook (Stripe, Paddle, Lemon Squeezy), verified by its signature",
        description:
          'Send the provider\'s webhook here as the provider sends it (body up to 1 MiB). 400 for an unknown connector or a bad or stale signature (one answer for both), or a malformed payload; ' +
          '429 past 50 calls a second from one address or 20 to one connector (per node); 200 for an accepted, ignored, unmapped or duplicate event.',
      },
    },
  )
}

// POST /v1/keys/:id/credits: the admin's add, subtract or set (service.ts adjustCredits). The answer
// is the key as the API shows it: its schema and its reading are the keys module's, passed in by it
// (app.ts mounts this with them), so credits do not import keys.
import { Elysia } from 'elysia'
import type { TSchema } from '@sinclair/typebox'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth, problems, withBody } from '../../http/responses'
import { IdParam } from '../../http/schema'
import { CreditsBody } from './model'
import { adjustCredits, type FindKey } from './service'

export function creditRoutes<S extends TSchema>(deps: Deps, key: { schema: S; find: FindKey<S['static']> }) {
  return new Elysia({ name: 'keyward.credits', prefix: '/v1/keys', detail: { tags: ['License keys'] } })
    .use(authPlugin(deps.principals))
    .guard({ response: behindAuth() })
    .guard({ params: IdParam(), response: problems(404) }, (byId) =>
      byId.post('/:id/credits', ({ principal, params, body }) => adjustCredits(deps, principal, params.id, body, key.find), {
        auth: 'keys:write',
        body: CreditsBody,
        response: { 200: key.schema, ...withBody(), ...problems(409) },
        detail: {
          summary: "Add to, subtract from or set a metered key's credits, at once on every node (emits key.credits_updated)",
          description:
            'subtract stops at 0; amount 0..10^12 (at least 1 to add or subtract, else 400). Refills due are applied first. ' +
            'An unmetered key (credits null) is 409 key_unmetered.',
        },
      }),
    )
}

import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth, problems } from '../../http/responses'
import { Activation, ActivationParams } from './model'
import { releaseByAdmin } from './service'

export function activationRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.activations' })
    .use(authPlugin(deps.principals))
    .delete('/v1/keys/:id/activations/:activation_id', ({ principal, params }) => releaseByAdmin(deps, principal, params.id, params.activation_id), {
      auth: 'keys:write',
      params: ActivationParams,
      response: { 200: Activation, ...behindAuth(), ...problems(404) },
      detail: {
        tags: ['License keys'],
        summary: 'Deactivate one activation (reason admin), freeing the seat at once on every node',
      },
    })
}

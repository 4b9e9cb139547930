// `auth: '<scope>'` on a route: resolves the caller's principal and enforces the scope table.
// Runs at the transform stage, before body validation, so an unauthenticated caller learns nothing
// about a route's schema. Same 401 for missing, malformed, unknown and revoked tokens (no oracle).
import { Elysia } from 'elysia'
import type { Principal, Principals } from '../modules/api-keys/principals'
import { allows, type Requirement } from '../modules/api-keys/scopes'
import { AppError } from './errors'

const resolved = new WeakMap<Request, Principal>()

export function authPlugin(principals: Principals) {
  return new Elysia({ name: 'keyward.auth' }).macro({
    auth: (needed: Requirement) => ({
      detail: { security: [{ bearer: [] }] },
      async transform({ request }) {
        const principal = await principals.authenticate(request.headers.get('authorization'))
        if (!principal) throw new AppError('unauthorized', 'Missing, malformed or unknown API key')
        if (!allows(principal.scope, needed)) {
          throw new AppError('insufficient_scope', `This route needs the ${needed} scope (or full_access)`)
        }
        resolved.set(request, principal)
      },
      resolve({ request }) {
        return { principal: resolved.get(request)! }
      },
    }),
  })
}

// Authentication with a needed scope, one implementation for both doors: `auth: '<scope>'` on an Elysia
// route (the macro below) and the validate route served by Bun's router (modules/validation/fast-path.ts).
// The macro runs at the transform stage, before body validation, so an unauthenticated caller learns
// nothing about a route's schema. Same 401 for missing, malformed, unknown and revoked tokens (no oracle).
import { Elysia } from 'elysia'
import { AppError } from '../core/errors'
import type { Authenticator, Principal } from '../core/principal'
import { allows, type Requirement } from '../core/scopes'

function admit(principal: Principal | null, needed: Requirement): Principal {
  if (!principal) throw new AppError('unauthorized', 'Missing, malformed or unknown API key')
  if (!allows(principal.scope, needed)) {
    const or = needed === 'full_access' ? '' : ' (or full_access)'
    throw new AppError('insufficient_scope', `This route needs the ${needed} scope${or}`)
  }
  return principal
}

/**
 * The caller of `authorization` if it holds `needed`; throws 401/403 otherwise. Synchronous for a
 * known caller (no promise to await on the validate hot path); a promise while the caller is loaded.
 */
export function authorize(
  principals: Authenticator,
  authorization: string | null | undefined,
  needed: Requirement,
  now?: number,
): Principal | Promise<Principal> {
  const principal = principals.authenticate(authorization, now)
  return principal instanceof Promise ? principal.then((p) => admit(p, needed)) : admit(principal, needed)
}

const resolved = new WeakMap<Request, Principal>()

export function authPlugin(principals: Authenticator) {
  return new Elysia({ name: 'keyward.auth' }).macro({
    auth: (needed: Requirement) => ({
      detail: { security: [{ bearer: [] }] },
      async transform({ request }) {
        resolved.set(request, await authorize(principals, request.headers.get('authorization'), needed))
      },
      resolve({ request }) {
        return { principal: resolved.get(request)! }
      },
    }),
  })
}

// Who is calling: what authentication yields and what the HTTP layer and the modules read of it.
// The implementation (token → principal, cached per node) is modules/api-keys/principals.ts.
import type { Plan } from './plans'
import type { Scope } from './scopes'

export interface Principal {
  apiKeyId: string
  accountId: string
  scope: Scope
  plan: Plan
  tokenHash: string
}

export interface Authenticator {
  /**
   * The principal for an `Authorization` header value, or null (unknown, malformed, revoked).
   * Synchronous when the caller is known (the validate route relies on it: no promise per call).
   */
  authenticate(header: string | null | undefined, now?: number): Principal | null | Promise<Principal | null>
}

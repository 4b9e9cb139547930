// The scope table of the contract. Each API key has exactly one scope; full_access allows everything.
export const SCOPES = [
  'full_access',
  'validate',
  'keys:read',
  'keys:write',
  'keys:revoke',
  'products:read',
  'products:write',
  'analytics:read',
  'offline:write',
] as const
export type Scope = (typeof SCOPES)[number]

/** What a route requires: a scope, or `any` (ping, public key). full_access satisfies every requirement. */
export type Requirement = Scope | 'any'

export const allows = (held: Scope, needed: Requirement) => needed === 'any' || held === 'full_access' || held === needed

// The scope × route matrix: ONE table of every route in the contract's scope table. For each (scope,
// route): allowed → neither 401 nor 403 (and the route exists); not allowed → exactly 403
// insufficient_scope naming the scope needed. No token at all → 401 everywhere.
// Requests use unknown ids and empty bodies, so an allowed call answers 400/404 without touching data.
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { SCOPES, type Requirement, type Scope } from '../../src/core/scopes'
import { scopedToken, useHarness } from '../support/harness'
import { expectProblem, ghostId } from '../support/helpers'

setDefaultTimeout(60_000)

interface Row {
  method: string
  path: () => string
  needs: Requirement
  body?: unknown
}

const FP = 'ab'.repeat(32)

/** The contract's scope table, route by route. `full_access` rows are the webhooks and API keys. */
export const MATRIX: Row[] = [
  { method: 'GET', path: () => '/v1/ping', needs: 'any' },
  { method: 'GET', path: () => '/v1/offline/public-key', needs: 'any' },
  { method: 'GET', path: () => '/v1/offline/keys', needs: 'any' },
  { method: 'GET', path: () => '/v1/signing-keys', needs: 'any' },

  { method: 'POST', path: () => '/v1/validate', needs: 'validate', body: {} },
  { method: 'POST', path: () => '/v1/deactivate', needs: 'validate', body: {} },
  { method: 'POST', path: () => '/v1/devices', needs: 'validate', body: {} },

  { method: 'GET', path: () => '/v1/keys', needs: 'keys:read' },
  { method: 'GET', path: () => `/v1/keys/${ghostId('key')}`, needs: 'keys:read' },
  { method: 'GET', path: () => '/v1/keys/export', needs: 'keys:read' },

  { method: 'POST', path: () => '/v1/keys', needs: 'keys:write', body: {} },
  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/extend`, needs: 'keys:write', body: { expires_at: null } },
  { method: 'DELETE', path: () => `/v1/keys/${ghostId('key')}/activations/${ghostId('act')}`, needs: 'keys:write' },

  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/reissue`, needs: 'keys:write' },
  { method: 'POST', path: () => '/v1/keys/import?dry_run=true', needs: 'keys:write', body: { rows: [] } },
  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/credits`, needs: 'keys:write', body: { operation: 'add', amount: 1 } },

  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/revoke`, needs: 'keys:revoke', body: {} },
  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/suspend`, needs: 'keys:revoke', body: {} },
  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/reinstate`, needs: 'keys:revoke' },

  { method: 'GET', path: () => '/v1/products', needs: 'products:read' },
  { method: 'GET', path: () => `/v1/products/${ghostId('prod')}`, needs: 'products:read' },

  { method: 'GET', path: () => '/v1/policies', needs: 'products:read' },
  { method: 'GET', path: () => `/v1/policies/${ghostId('pol')}`, needs: 'products:read' },

  { method: 'POST', path: () => '/v1/products', needs: 'products:write', body: {} },
  { method: 'POST', path: () => '/v1/policies', needs: 'products:write', body: {} },
  { method: 'PATCH', path: () => `/v1/policies/${ghostId('pol')}`, needs: 'products:write', body: {} },
  { method: 'DELETE', path: () => `/v1/policies/${ghostId('pol')}`, needs: 'products:write' },
  { method: 'PUT', path: () => `/v1/products/${ghostId('prod')}`, needs: 'products:write', body: {} },
  { method: 'DELETE', path: () => `/v1/products/${ghostId('prod')}`, needs: 'products:write' },

  { method: 'GET', path: () => '/v1/analytics/overview', needs: 'analytics:read' },
  { method: 'GET', path: () => '/v1/analytics/activations?range=7d', needs: 'analytics:read' },
  { method: 'GET', path: () => '/v1/analytics/geography', needs: 'analytics:read' },
  { method: 'GET', path: () => '/v1/analytics/credits?range=7d', needs: 'analytics:read' },

  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/offline-licenses`, needs: 'offline:write', body: { device_fingerprint: FP } },
  { method: 'POST', path: () => '/v1/offline-licenses/sync', needs: 'offline:write', body: {} },
  { method: 'POST', path: () => `/v1/keys/${ghostId('key')}/relays`, needs: 'offline:write', body: {} },
  { method: 'DELETE', path: () => `/v1/relays/${ghostId('rly')}`, needs: 'offline:write' },
  { method: 'GET', path: () => `/v1/keys/${ghostId('key')}/relays`, needs: 'keys:read' },

  { method: 'POST', path: () => '/v1/webhooks', needs: 'full_access', body: {} },
  { method: 'GET', path: () => '/v1/webhooks', needs: 'full_access' },
  { method: 'GET', path: () => `/v1/webhooks/${ghostId('wh')}`, needs: 'full_access' },
  { method: 'PATCH', path: () => `/v1/webhooks/${ghostId('wh')}`, needs: 'full_access', body: {} },
  { method: 'DELETE', path: () => `/v1/webhooks/${ghostId('wh')}`, needs: 'full_access' },
  { method: 'POST', path: () => `/v1/webhooks/${ghostId('wh')}/test`, needs: 'full_access', body: {} },

  { method: 'POST', path: () => '/v1/api-keys', needs: 'full_access', body: {} },
  { method: 'GET', path: () => '/v1/api-keys', needs: 'full_access' },
  { method: 'POST', path: () => `/v1/api-keys/${ghostId('ak')}/rotate`, needs: 'full_access', body: {} },
  { method: 'DELETE', path: () => `/v1/api-keys/${ghostId('ak')}`, needs: 'full_access' },

  { method: 'POST', path: () => '/v1/connectors', needs: 'full_access', body: {} },
  { method: 'GET', path: () => '/v1/connectors', needs: 'full_access' },
  { method: 'GET', path: () => `/v1/connectors/${ghostId('con')}`, needs: 'full_access' },
  { method: 'PATCH', path: () => `/v1/connectors/${ghostId('con')}`, needs: 'full_access', body: {} },
  { method: 'DELETE', path: () => `/v1/connectors/${ghostId('con')}`, needs: 'full_access' },

  { method: 'POST', path: () => '/v1/signing-keys', needs: 'full_access', body: { activate_at: 'not a time' } },
  { method: 'POST', path: () => `/v1/signing-keys/${'f'.repeat(32)}/activate`, needs: 'full_access' },
  { method: 'POST', path: () => `/v1/signing-keys/${'f'.repeat(32)}/revoke`, needs: 'full_access', body: {} },
]

const allowed = (scope: Scope, needs: Requirement) => needs === 'any' || scope === 'full_access' || scope === needs

const h = useHarness()
const tokens = {} as Record<Scope, string>
beforeAll(async () => {
  // growth: analytics is allowed by the plan, so only the scope decides
  const { token } = await h.account('growth')
  tokens.full_access = token
  for (const scope of SCOPES) if (scope !== 'full_access') tokens[scope] = await scopedToken(h.call, token, scope)
}, 60_000)

test('the matrix covers every scope of the contract', () => {
  const needed = new Set(MATRIX.map((r) => r.needs))
  for (const scope of SCOPES) expect(needed.has(scope)).toBe(true)
  expect(needed.has('any')).toBe(true)
})

// The payment providers' endpoint takes no credential but the provider's signature: with or without a
// token, an unknown connector is 400, never 401/403.
test('POST /hooks/:connector_id needs no Authorization (the signature is its credential)', async () => {
  for (const token of [undefined, ...SCOPES.map((s) => tokens[s])]) {
    const res = await h.call('POST', `/hooks/${ghostId('con')}`, { token, raw: '{}', headers: { 'content-type': 'application/json' } })
    expectProblem(res, 400, 'invalid_request')
  }
})

// A relay's check-in takes no credential but the relay's signature: with or without a token, an
// unsigned call is 401 unauthorized (the signature's), never 403.
test('POST /v1/relays/:id/check-in needs no Authorization (the relay signature is its credential)', async () => {
  for (const token of [undefined, ...SCOPES.map((s) => tokens[s])]) {
    const res = await h.call('POST', `/v1/relays/${ghostId('rly')}/check-in`, { token, raw: '{}', headers: { 'content-type': 'application/json' } })
    expectProblem(res, 401, 'unauthorized')
    expect(res.body.detail).toContain('Keyward-Relay-Signature')
  }
})

describe('scope × route', () => {
  for (const row of MATRIX) {
    const label = `${row.method} ${row.path().replace(/_[0-9A-Z]{26}/g, '_…')} (${row.needs})`
    test(label, async () => {
      const refusedWith: string[] = []
      for (const scope of SCOPES) {
        const res = await h.call(row.method, row.path(), { token: tokens[scope], body: row.body })
        if (allowed(scope, row.needs)) {
          if (res.status === 401 || res.status === 403) throw new Error(`${scope} should be allowed, got ${res.status} ${JSON.stringify(res.body)}`)
          if (res.status === 404 && res.body?.detail === 'No such route') throw new Error(`route not implemented (${scope})`)
          if (res.status >= 500) throw new Error(`${scope}: ${res.status} ${JSON.stringify(res.body)}`)
        } else {
          const problem = expectProblem(res, 403, 'insufficient_scope')
          expect(problem.detail).toContain(row.needs)
          refusedWith.push(scope)
        }
      }
      const expectedRefusals = SCOPES.filter((s) => !allowed(s, row.needs))
      expect(refusedWith).toEqual(expectedRefusals)

      const anonymous = await h.call(row.method, row.path(), { body: row.body })
      expectProblem(anonymous, 401, 'unauthorized')
    })
  }
})

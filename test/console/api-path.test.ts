// The console builds every API path with apiPath: each value is one encoded segment, and a value URL
// parsing would resolve away (`.`, `..`, empty) is refused before anything is sent.
import { expect, test } from 'bun:test'
import { apiPath, withQuery } from '../../src/console/app/api'
import { resolve, sectionsOf } from '../../src/console/app/routes'
import { KeyPage } from '../../src/console/app/pages/key'
import { PolicyPage } from '../../src/console/app/pages/policies'

test('each value is one encoded path segment', () => {
  expect<string>(apiPath`/v1/keys/${'key_01JD7Z3X9K8Q4W2E6R5T1Y0V3J'}/revoke`).toBe('/v1/keys/key_01JD7Z3X9K8Q4W2E6R5T1Y0V3J/revoke')
  expect<string>(apiPath`/v1/keys/${'../api-keys'}`).toBe('/v1/keys/..%2Fapi-keys')
  expect<string>(apiPath`/v1/webhooks/${'a?b#c d'}`).toBe('/v1/webhooks/a%3Fb%23c%20d')
  // What the browser would make of it: still under /v1/keys/.
  expect(new URL(apiPath`/v1/keys/${'../api-keys'}`, 'http://node').pathname).toBe('/v1/keys/..%2Fapi-keys')
  for (const bad of ['..', '.', '']) expect(() => apiPath`/v1/keys/${bad}`).toThrow('not a path segment')
  expect<string>(withQuery(apiPath`/v1/keys`, { key_prefix: 'A&B', page: 0, status: '' })).toBe('/v1/keys?key_prefix=A%26B&page=0')
})

test('one table: the navigation lists the sections the router serves, and an item page gets only a well-formed id', () => {
  expect(sectionsOf('account').map((s) => s.path)).toEqual(['overview', 'products', 'policies', 'keys', 'import', 'webhooks', 'payments', 'api-keys', 'signing-keys', 'activity'])
  expect(sectionsOf('operator').map((s) => s.path)).toEqual(['accounts'])
  const id = 'key_01JD7Z3X9K8Q4W2E6R5T1Y0V3J'
  const page = resolve('account', `#/keys/${id}`)
  expect(page.section.path).toBe('keys')
  expect((page.view as any).type).toBe(KeyPage)
  expect((page.view as any).props.id).toBe(id)
  for (const hash of ['#/keys/..%2Fapi-keys', '#/keys/%2E%2E', '#/keys/key_%E0%A4%A', `#/keys/${id}/x`, '#/keys/prod_01JD7Z3X9K8Q4W2E6R5T1Y0V3J']) {
    const r = resolve('account', hash)
    expect(r.section.path).toBe('keys')
    expect(JSON.stringify(r.view, (k, v) => (k === 'type' && typeof v === 'function' ? v.name : v))).not.toContain('KeyPage')
  }
  const pol = resolve('account', '#/policies/pol_01JD7Z3X9K8Q4W2E6R5T1Y0V3J')
  expect((pol.view as any).type).toBe(PolicyPage)
  expect((pol.view as any).props.id).toBe('pol_01JD7Z3X9K8Q4W2E6R5T1Y0V3J')
  expect((resolve('account', `#/policies/${id}`).view as any).type).not.toBe(PolicyPage) // a key id is no policy id
  expect(resolve('account', '#/nowhere').section.path).toBe('overview')
  expect(resolve('operator', '#/keys').section.path).toBe('accounts')
})

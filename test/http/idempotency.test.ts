// Idempotency-Key on the foundation's create routes: replay, conflicts, refusals, expiry, scoping.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newProduct, useHarness } from '../support/harness'
import { expectProblem, ghostId } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

const count = async (table: 'products' | 'license_keys' | 'api_keys', accountId: string) => {
  const [{ n }] = await h.node.deps.sql`select count(*)::int as n from ${h.node.deps.sql(table)} where account_id = ${accountId}`
  return n as number
}

describe('replay of the first response', () => {
  const routes = [
    { path: '/v1/products', table: 'products', body: async () => ({ name: 'Idem', slug: 'idem' }) },
    { path: '/v1/keys', table: 'license_keys', body: async (token: string) => ({ product_id: (await newProduct(h.call, token)).id, plan: 'pro' }) },
    { path: '/v1/api-keys', table: 'api_keys', body: async () => ({ name: 'idem', scope: 'validate' }) },
  ] as const

  for (const route of routes) {
    test(`POST ${route.path}: same key and body → same status and body, Idempotent-Replayed, nothing created`, async () => {
      const { id, token } = await h.account()
      const body = await route.body(token)
      const headers = { 'idempotency-key': `k-${route.path}` }
      const first = await h.call('POST', route.path, { token, headers, body })
      expect(first.status).toBe(201)
      expect(first.headers.get('idempotent-replayed')).toBeNull()
      const before = await count(route.table, id)
      const again = await h.call('POST', route.path, { token, headers, body })
      expect(again.status).toBe(201)
      expect(again.body).toEqual(first.body)
      expect(again.headers.get('idempotent-replayed')).toBe('true')
      expect(await count(route.table, id)).toBe(before)
      // fields in another order are the same request
      const reordered = Object.fromEntries(Object.entries(body).reverse())
      const third = await h.call('POST', route.path, { token, headers, body: reordered })
      expect(third.status).toBe(201)
      expect(third.body).toEqual(first.body)
      // a different body with the same key is refused and creates nothing
      const changed = { ...body, [route.path === '/v1/keys' ? 'plan' : 'name']: 'changed' }
      expectProblem(await h.call('POST', route.path, { token, headers, body: changed }), 409, 'idempotency_key_reused')
      // unknown fields are ignored, so adding one does not make it another request
      expect((await h.call('POST', route.path, { token, headers, body: { ...body, unknown_field: 1 } })).status).toBe(201)
      expect(await count(route.table, id)).toBe(before)
    })
  }

  test('without the header every call creates', async () => {
    const { id, token } = await h.account()
    await h.call('POST', '/v1/api-keys', { token, body: { name: 'a', scope: 'validate' } })
    await h.call('POST', '/v1/api-keys', { token, body: { name: 'a', scope: 'validate' } })
    expect(await count('api_keys', id)).toBe(3)
  })
})

describe('refusals and edge cases', () => {
  test('a refused request is replayed as the same refusal (404 unknown product, 409 slug_taken)', async () => {
    const { token } = await h.account()
    const missing = { product_id: ghostId('prod') }
    const headers = { 'idempotency-key': 'refused-1' }
    const first = expectProblem(await h.call('POST', '/v1/keys', { token, headers, body: missing }), 404, 'not_found')
    const again = await h.call('POST', '/v1/keys', { token, headers, body: missing })
    const replay = expectProblem(again, 404, 'not_found')
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(replay.detail).toBe(first.detail)

    await newProduct(h.call, token, 'taken')
    const slugHeaders = { 'idempotency-key': 'refused-2' }
    expectProblem(await h.call('POST', '/v1/products', { token, headers: slugHeaders, body: { name: 'x', slug: 'taken' } }), 409, 'slug_taken')
    expectProblem(await h.call('POST', '/v1/products', { token, headers: slugHeaders, body: { name: 'x', slug: 'taken' } }), 409, 'slug_taken')
  })

  test('a request that fails validation stores nothing: the corrected request may reuse the key', async () => {
    const { token } = await h.account()
    const headers = { 'idempotency-key': 'fix-and-retry' }
    expectProblem(await h.call('POST', '/v1/products', { token, headers, body: { name: 'x' } }), 400)
    expect((await h.call('POST', '/v1/products', { token, headers, body: { name: 'x', slug: 'x' } })).status).toBe(201)
  })

  test('Idempotency-Key must be 1..255 characters', async () => {
    const { token } = await h.account()
    expectProblem(await h.call('POST', '/v1/products', { token, headers: { 'idempotency-key': 'k'.repeat(256) }, body: { name: 'x', slug: 'x' } }), 400)
    expect((await h.call('POST', '/v1/products', { token, headers: { 'idempotency-key': 'k'.repeat(255) }, body: { name: 'x', slug: 'x' } })).status).toBe(201)
  })

  test('a key whose first request is still in progress is 409', async () => {
    const { id, token } = await h.account()
    await h.node.deps.sql`insert into idempotency_keys (account_id, idem_key, request_hash) values (${id}, 'running', 'whatever')`
    expectProblem(await h.call('POST', '/v1/products', { token, headers: { 'idempotency-key': 'running' }, body: { name: 'x', slug: 'x' } }), 409, 'idempotency_key_reused')
  })

  test('keys are per account, and expire after 24 hours', async () => {
    const a = await h.account()
    const b = await h.account()
    const headers = { 'idempotency-key': 'shared' }
    const body = { name: 'Same', slug: 'same' }
    const fromA = await h.call('POST', '/v1/products', { token: a.token, headers, body })
    const fromB = await h.call('POST', '/v1/products', { token: b.token, headers, body })
    expect(fromB.status).toBe(201)
    expect(fromB.headers.get('idempotent-replayed')).toBeNull()
    expect(fromB.body.id).not.toBe(fromA.body.id)

    await h.node.deps.sql`update idempotency_keys set created_at = now() - interval '25 hours' where account_id = ${a.id}`
    const later = await h.call('POST', '/v1/products', { token: a.token, headers, body: { name: 'Other', slug: 'other' } })
    expect(later.status).toBe(201)
    expect(later.headers.get('idempotent-replayed')).toBeNull()
  })

  test('the same key on another route is a different request (409)', async () => {
    const { token } = await h.account()
    const headers = { 'idempotency-key': 'cross-route' }
    expect((await h.call('POST', '/v1/api-keys', { token, headers, body: { name: 'x', scope: 'validate' } })).status).toBe(201)
    expectProblem(await h.call('POST', '/v1/products', { token, headers, body: { name: 'x', slug: 'x' } }), 409, 'idempotency_key_reused')
  })
})

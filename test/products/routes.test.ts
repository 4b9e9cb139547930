// The product routes: happy paths field by field, the plan's product limit, slug and delete refusals.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ID, insertActivation, ISO_MS } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

describe('products', () => {
  test('POST /v1/products → 201 product, emits product.created', async () => {
    const { id, token } = await h.account()
    const res = await h.call('POST', '/v1/products', { token, body: { name: 'Photo Pro', slug: 'photo-pro', description: 'Edits photos' } })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(ID('prod')),
      name: 'Photo Pro',
      slug: 'photo-pro',
      description: 'Edits photos',
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
      active_keys: 0,
      total_activations: 0,
      offline_portal: false,
    })
    const events = await eventsOf(h, id, 'product.created')
    expect(events.map((e) => e.data)).toEqual([res.body])
  })

  test('GET /v1/products lists oldest first; GET /v1/products/:id returns one', async () => {
    const { token } = await h.account()
    const a = await newProduct(h.call, token, 'first')
    const b = await newProduct(h.call, token, 'second')
    const list = await h.call('GET', '/v1/products', { token })
    expect(list.status).toBe(200)
    expect(list.body).toEqual({ data: [a, b] })
    const one = await h.call('GET', `/v1/products/${b.id}`, { token })
    expect(one.status).toBe(200)
    expect(one.body).toEqual(b)
  })

  test('active_keys counts effectively active keys; total_activations counts every activation ever', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const active = await newKey(h.call, token, p.id)
    const revoked = await newKey(h.call, token, p.id)
    const lapsed = await newKey(h.call, token, p.id)
    await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token })
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 minute' where id = ${lapsed.id}`
    await insertActivation(h, active, id)
    await insertActivation(h, active, id, { status: 'deactivated' })
    await insertActivation(h, revoked, id)
    const res = await h.call('GET', `/v1/products/${p.id}`, { token })
    expect(res.body).toMatchObject({ active_keys: 1, total_activations: 3 })
  })

  test('PUT /v1/products/:id updates name and description; the same slug is ignored', async () => {
    const { token } = await h.account()
    const p = await newProduct(h.call, token, 'stay')
    const res = await h.call('PUT', `/v1/products/${p.id}`, { token, body: { name: 'New name', description: 'Now described', slug: 'stay' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: p.id, name: 'New name', description: 'Now described', slug: 'stay', created_at: p.created_at })
    expect(res.body.updated_at >= p.updated_at).toBe(true)
    const cleared = await h.call('PUT', `/v1/products/${p.id}`, { token, body: { description: null } })
    expect(cleared.body).toMatchObject({ name: 'New name', description: null })
    const untouched = await h.call('PUT', `/v1/products/${p.id}`, { token, body: {} })
    expect(untouched.status).toBe(200)
    expect(untouched.body).toMatchObject({ name: 'New name', description: null, slug: 'stay' })
  })

  test('DELETE /v1/products/:id → 204 and takes its revoked/expired keys and their activations with it', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const revoked = await newKey(h.call, token, p.id)
    const lapsed = await newKey(h.call, token, p.id)
    await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token })
    await h.node.deps.sql`update license_keys set status = 'expired', expires_at = now() - interval '1 day' where id = ${lapsed.id}`
    await insertActivation(h, revoked, id)
    const del = await h.call('DELETE', `/v1/products/${p.id}`, { token })
    expect(del.status).toBe(204)
    expect(del.body).toBeNull()
    expect((await h.call('GET', `/v1/products/${p.id}`, { token })).status).toBe(404)
    expect((await h.call('GET', `/v1/keys/${revoked.id}`, { token })).status).toBe(404)
    const [{ n }] = await h.node.deps.sql`select count(*)::int as n from activations where product_id = ${p.id}`
    expect(n).toBe(0)
  })
})

describe('402 plan_limit_reached', () => {
  test('product count limit per plan; an upgrade lifts it at once, a downgrade deletes nothing', async () => {
    const { id, token } = await h.account('free')
    await newProduct(h.call, token)
    const refused = await h.call('POST', '/v1/products', { token, body: { name: 'Two', slug: 'two' } })
    expect(expectProblem(refused, 402, 'plan_limit_reached').detail).toContain('free')
    expect((await h.call('GET', '/v1/products', { token })).body.data).toHaveLength(1)

    await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'hobby' } })
    expect((await h.call('POST', '/v1/products', { token, body: { name: 'Two', slug: 'two' } })).status).toBe(201)
    expect((await h.call('POST', '/v1/products', { token, body: { name: 'Three', slug: 'three' } })).status).toBe(201)
    expectProblem(await h.call('POST', '/v1/products', { token, body: { name: 'Four', slug: 'four' } }), 402, 'plan_limit_reached')

    await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'free' } })
    expect((await h.call('GET', '/v1/products', { token })).body.data).toHaveLength(3)
    expectProblem(await h.call('POST', '/v1/products', { token, body: { name: 'Five', slug: 'five' } }), 402)
  })

  test('concurrent creates cannot slip past the limit', async () => {
    const { token } = await h.account('starter')
    const results = await Promise.all(
      Array.from({ length: 14 }, (_, i) => h.call('POST', '/v1/products', { token, body: { name: `P${i}`, slug: `p${i}` } })),
    )
    expect(results.filter((r) => r.status === 201)).toHaveLength(10)
    for (const r of results.filter((r) => r.status !== 201)) expectProblem(r, 402, 'plan_limit_reached')
  })
})

describe('409', () => {
  test('slug_taken: the slug is unique per account, not globally', async () => {
    const a = await h.account()
    const b = await h.account()
    await newProduct(h.call, a.token, 'shared-slug')
    expectProblem(await h.call('POST', '/v1/products', { token: a.token, body: { name: 'again', slug: 'shared-slug' } }), 409, 'slug_taken')
    expect((await h.call('POST', '/v1/products', { token: b.token, body: { name: 'b', slug: 'shared-slug' } })).status).toBe(201)
  })
})

describe('422 product_has_active_keys', () => {
  test('DELETE of a product with an active key is refused and deletes nothing', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id)
    await insertActivation(h, key, id)
    expectProblem(await h.call('DELETE', `/v1/products/${p.id}`, { token }), 422, 'product_has_active_keys')
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.activations).toHaveLength(1)
    // a key that expired by time only no longer counts as active
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 second' where id = ${key.id}`
    expect((await h.call('DELETE', `/v1/products/${p.id}`, { token })).status).toBe(204)
  })
})

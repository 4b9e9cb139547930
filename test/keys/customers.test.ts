// A key's customer (docs/api.md, "Customers and search"): set on create, replaced whole or cleared by
// PATCH, every bad value a 400 naming its field that changes nothing, carried by the key's events; and
// GET /v1/keys?q=: each kind of match (id, external_id, customer id, key prefix, e-mail or name part),
// non-matches, its combination with the other filters and the paging, per account.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem } from '../support/helpers'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })

async function setup() {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  return { accountId: id, token, product }
}

const create = (token: string, body: Record<string, unknown>) => h.call('POST', '/v1/keys', { token, body })
const patch = (token: string, id: string, body: unknown) => h.call('PATCH', `/v1/keys/${id}`, { token, body })
const search = async (token: string, query: string) => {
  const res = await h.call('GET', `/v1/keys?${query}`, { token })
  expect(res.status).toBe(200)
  return res.body as { data: { id: string; customer: unknown }[]; total: number; has_more: boolean; page: number }
}
const ids = async (token: string, query: string) => (await search(token, query)).data.map((k) => k.id).sort()

describe('customer on keys', () => {
  test('create with a customer: stored (e-mail lower-cased), answered, on GET, and in key.created', async () => {
    const { accountId, token, product } = await setup()
    const res = await create(token, { product_id: product.id, customer: { email: 'Jane.Doe@Acme.COM', name: 'Jane Doe', external_id: 'cus_123' } })
    expect(res.status).toBe(201)
    expect(res.body.customer).toEqual({ email: 'jane.doe@acme.com', name: 'Jane Doe', external_id: 'cus_123' })
    const { activations: _, ...got } = (await h.call('GET', `/v1/keys/${res.body.id}`, { token })).body
    expect(got.customer).toEqual(res.body.customer)
    const [created] = await eventsOf(h, accountId, 'key.created')
    expect(created!.data.customer).toEqual(res.body.customer)
    expect(created!.data.key_value).toBeUndefined()

    // one field is enough; the others are null; none given = null
    expect((await create(token, { product_id: product.id, customer: { name: 'Only A Name' } })).body.customer).toEqual({ email: null, name: 'Only A Name', external_id: null })
    expect((await create(token, { product_id: product.id })).body.customer).toBeNull()
    expect((await create(token, { product_id: product.id, customer: null })).body.customer).toBeNull()
  })

  test('PATCH replaces the customer whole, null clears it, omitted keeps it; key.updated carries it', async () => {
    const { accountId, token, product } = await setup()
    const key = (await create(token, { product_id: product.id, customer: { email: 'a@example.com', name: 'A' } })).body
    const replaced = await patch(token, key.id, { customer: { external_id: 'crm-9' } })
    expect(replaced.status).toBe(200)
    expect(replaced.body.customer).toEqual({ email: null, name: null, external_id: 'crm-9' })
    expect((await patch(token, key.id, { plan: 'pro' })).body.customer).toEqual({ email: null, name: null, external_id: 'crm-9' })
    // the same customer again (as the key object shows it, nulls and all): nothing changes, no event
    const before = (await eventsOf(h, accountId, 'key.updated')).length
    expect((await patch(token, key.id, { customer: { email: null, name: null, external_id: 'crm-9' } })).status).toBe(200)
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(before)
    const cleared = await patch(token, key.id, { customer: null })
    expect(cleared.body.customer).toBeNull()
    const updated = await eventsOf(h, accountId, 'key.updated')
    expect(updated.map((e) => e.data.customer)).toEqual([{ email: null, name: null, external_id: 'crm-9' }, { email: null, name: null, external_id: 'crm-9' }, null])
  })

  test('bad customers: 400 naming the field, nothing created or changed', async () => {
    const { accountId, token, product } = await setup()
    const key = (await create(token, { product_id: product.id, customer: { email: 'keep@example.com' } })).body
    const cases: [unknown, string][] = [
      [{ email: 'not-an-address' }, 'body.customer.email'],
      [{ email: 'a@example.com, b@example.com' }, 'body.customer.email'],
      [{ email: 'a@example.com\r\nBcc: x@example.net' }, 'body.customer.email'],
      [{ email: `${'a'.repeat(60)}@${'b'.repeat(190)}.com` }, 'body.customer.email'],
      [{ email: 42 }, 'body.customer.email'],
      [{ name: '' }, 'body.customer.name'],
      [{ name: '   ' }, 'body.customer.name'],
      [{ name: 'x'.repeat(201) }, 'body.customer.name'],
      [{ name: 'bell\u0007' }, 'body.customer.name'],
      [{ external_id: '' }, 'body.customer.external_id'],
      [{ external_id: 'y'.repeat(201) }, 'body.customer.external_id'],
      [{ phone: '555' }, 'body.customer.phone'],
      [{}, 'body.customer'],
      [{ email: null, name: null }, 'body.customer'],
      ['jane@example.com', 'body.customer'],
      [['jane@example.com'], 'body.customer'],
    ]
    for (const [customer, field] of cases) {
      for (const res of [await create(token, { product_id: product.id, customer }), await patch(token, key.id, { customer, plan: 'changed' })]) {
        expectProblem(res, 400, 'invalid_request')
        expect({ customer, fields: res.body.errors.map((e: { field: string }) => e.field) }).toEqual({ customer, fields: [field] })
      }
    }
    // 200 characters exactly is fine
    expect((await create(token, { product_id: product.id, customer: { name: 'n'.repeat(200), external_id: 'e'.repeat(200) } })).status).toBe(201)
    const after = (await h.call('GET', `/v1/keys/${key.id}`, { token })).body
    expect(after).toMatchObject({ plan: null, customer: { email: 'keep@example.com', name: null, external_id: null } })
    expect(await eventsOf(h, accountId, 'key.created')).toHaveLength(2)
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(0)
  })
})

describe('GET /v1/keys?q=', () => {
  test('each kind of match, and what does not match', async () => {
    const { token, product } = await setup()
    const jane = (await create(token, { product_id: product.id, customer: { email: 'jane.doe@acme.com', name: 'Jane Doe', external_id: 'cus_JANE' } })).body
    const bob = (await create(token, { product_id: product.id, customer: { email: 'bob@builder.io', name: 'Robert "Bob" Müller' } })).body
    const bare = (await create(token, { product_id: product.id })).body
    const enc = encodeURIComponent

    expect(await ids(token, `q=${jane.id}`)).toEqual([jane.id]) // id, exactly
    expect(await ids(token, `q=${jane.id.slice(0, -1)}`)).toEqual([]) // not a part of it
    expect(await ids(token, 'q=cus_JANE')).toEqual([jane.id]) // customer.external_id, exactly
    expect(await ids(token, 'q=cus_JAN')).toEqual([])
    expect(await ids(token, 'q=cus_jane')).toEqual([]) // ids are exact, case and all
    expect(await ids(token, 'q=jane.doe@acme.com')).toEqual([jane.id]) // e-mail, whole
    expect(await ids(token, 'q=JANE.DOE@ACME.COM')).toEqual([jane.id]) // ignoring case
    expect(await ids(token, 'q=acme')).toEqual([jane.id]) // e-mail, a part
    expect(await ids(token, 'q=builder.io')).toEqual([bob.id])
    expect(await ids(token, 'q=doe')).toEqual([jane.id]) // e-mail and name both hold it: once
    expect(await ids(token, `q=${enc('müller')}`)).toEqual([bob.id]) // name, a part, ignoring case (not only ASCII)
    expect(await ids(token, `q=${enc('"Bob"')}`)).toEqual([bob.id])
    expect(await ids(token, 'q=nobody@nowhere.example')).toEqual([])
    // a long q: the index is asked for a part of it (search.ts probesOf), the whole of it decides
    expect(await ids(token, 'q=jane.doe@acme.org')).toEqual([])
    expect(await ids(token, 'q=e.doe@acme.co')).toEqual([jane.id])
    expect(await ids(token, `q=${enc('Robert "Bob" Müll')}`)).toEqual([bob.id])
    expect(await ids(token, `q=${enc('Robert "Bob" Miller')}`)).toEqual([])
    // LIKE's wildcards are literal: '%' and '_' match only themselves
    expect(await ids(token, `q=${enc('%')}`)).toEqual([])
    expect(await ids(token, `q=${enc('jane_doe')}`)).toEqual([])
    expect(await ids(token, `q=${enc('j%e')}`)).toEqual([])

    // key prefix: 1 to 5 of its characters, any case; more than 5 is not a prefix
    for (const k of [jane, bob, bare]) {
      expect(await ids(token, `q=${k.key_prefix}`)).toContain(k.id)
      expect(await ids(token, `q=${k.key_prefix.toLowerCase()}`)).toContain(k.id)
      expect(await ids(token, `q=${k.key_prefix.slice(0, 3)}`)).toContain(k.id)
    }
    expect(await ids(token, `q=${bare.key_value.slice(0, 7)}`)).toEqual([])
  })

  test('external_id (an import\'s or a connector\'s) matches exactly', async () => {
    const { token, product } = await setup()
    const res = await h.call('POST', '/v1/keys/import', { token, body: { rows: [{ key: 'OLD-VALUE-0001', external_id: 'gumroad:8812', product_id: product.id }] } })
    expect(res.status).toBe(201)
    expect(await ids(token, 'q=gumroad:8812')).toEqual([res.body.keys[0].id])
    expect(await ids(token, 'q=gumroad:881')).toEqual([])
  })

  test('combines with every other filter and pages like the list', async () => {
    const { token, product } = await setup()
    const other = await newProduct(h.call, token)
    const made: { id: string }[] = []
    for (let i = 0; i < 7; i++) {
      made.push((await create(token, { product_id: i < 5 ? product.id : other.id, plan: i % 2 ? 'pro' : 'basic', customer: { email: `buyer${i}@shop.example` } })).body)
    }
    await create(token, { product_id: product.id, customer: { email: 'someone@else.example' } })
    await h.call('POST', `/v1/keys/${made[0]!.id}/revoke`, { token, body: {} })
    const all = made.map((k) => k.id)

    expect(await ids(token, 'q=shop.example')).toEqual([...all].sort())
    expect(await ids(token, `q=shop.example&product_id=${other.id}`)).toEqual([all[5]!, all[6]!].sort())
    expect(await ids(token, 'q=shop.example&plan=pro')).toEqual([all[1]!, all[3]!, all[5]!].sort())
    expect(await ids(token, 'q=shop.example&status=revoked')).toEqual([all[0]!])
    expect(await ids(token, 'q=shop.example&status=active&plan=basic')).toEqual([all[2]!, all[4]!, all[6]!].sort())
    expect(await ids(token, 'q=else.example&status=revoked')).toEqual([])

    // paging: the list's order (newest first), total over every page
    const p0 = await search(token, 'q=shop.example&page_size=3')
    const p1 = await search(token, 'q=shop.example&page_size=3&page=1')
    const p2 = await search(token, 'q=shop.example&page_size=3&page=2')
    expect([p0.total, p1.total, p2.total]).toEqual([7, 7, 7])
    expect([p0.has_more, p1.has_more, p2.has_more]).toEqual([true, true, false])
    expect([...p0.data, ...p1.data, ...p2.data].map((k) => k.id)).toEqual([...all].reverse())
    expect(p0.data[0]!.customer).toEqual({ email: 'buyer6@shop.example', name: null, external_id: null })
  })

  test('another account\'s keys are never found; q out of bounds is 400', async () => {
    const a = await setup()
    const b = await setup()
    const key = (await create(a.token, { product_id: a.product.id, customer: { email: 'shared@corp.example', external_id: 'cus_SHARED' } })).body
    expect(await ids(b.token, 'q=shared@corp.example')).toEqual([])
    expect(await ids(b.token, 'q=cus_SHARED')).toEqual([])
    expect(await ids(b.token, `q=${key.id}`)).toEqual([])
    expect(await ids(b.token, `q=${key.key_prefix}`)).toEqual([])
    expect(await ids(a.token, 'q=shared@corp.example')).toEqual([key.id])

    for (const q of ['', 'x'.repeat(201)]) {
      const res = await h.call('GET', `/v1/keys?q=${q}`, { token: a.token })
      expectProblem(res, 400, 'invalid_request')
      expect(JSON.stringify(res.body)).toContain('q')
    }
    expect((await h.call('GET', `/v1/keys?q=${'x'.repeat(200)}`, { token: a.token })).status).toBe(200)
  })
})

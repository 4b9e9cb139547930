// Operator routes of docs/api.md, "API keys": list and search accounts with their usage, issue an API key to an
// existing account (recovery). Both only with ADMIN_TOKEN, like every /admin route.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { eventsOf, expectProblem, ID, insertActivation, ISO_MS, newApiKeyShape } from '../support/helpers'

setDefaultTimeout(30_000)

let h: Harness
beforeAll(async () => {
  h = await startHarness()
}, 60_000)
afterAll(() => h.close())

const admin = (method: string, path: string, body?: unknown) => h.call(method, path, { token: ADMIN_TOKEN, body })
const createAccount = async (name: string, plan = 'growth') => {
  const res = await admin('POST', '/admin/accounts', { name, plan })
  expect(res.status).toBe(201)
  return res.body as { account: { id: string; name: string; plan: string; created_at: string }; api_key: { token: string } }
}

describe('GET /admin/accounts', () => {
  test('newest first, with usage counts, paged with page, page_size, total and has_more', async () => {
    const made = []
    for (const i of [1, 2, 3]) made.push(await createAccount(`Listing ${i}`, 'starter'))
    // usage of the newest one: 1 product, 2 keys (one revoked), 1 activation, 1 API key
    const { account, api_key } = made[2]!
    const product = await newProduct(h.call, api_key.token)
    const k1 = await newKey(h.call, api_key.token, product.id)
    await newKey(h.call, api_key.token, product.id)
    await h.call('POST', `/v1/keys/${k1.id}/revoke`, { token: api_key.token })
    await insertActivation(h, k1, account.id)

    const page0 = await admin('GET', '/admin/accounts?q=listing&page_size=2')
    expect(page0.status).toBe(200)
    expect(page0.body).toEqual({
      data: [
        { ...account, usage: { products: 1, keys: 2, active_keys: 1, activations: 1, api_keys: 1 } },
        { ...made[1]!.account, usage: { products: 0, keys: 0, active_keys: 0, activations: 0, api_keys: 1 } },
      ],
      page: 0,
      page_size: 2,
      total: 3,
      has_more: true,
    })
    const page1 = await admin('GET', '/admin/accounts?q=listing&page_size=2&page=1')
    expect(page1.body).toMatchObject({ page: 1, page_size: 2, total: 3, has_more: false })
    expect(page1.body.data.map((a: { id: string }) => a.id)).toEqual([made[0]!.account.id])
    // the same usage as GET /admin/accounts/:id
    const one = await admin('GET', `/admin/accounts/${account.id}`)
    expect(page0.body.data[0]).toEqual(one.body)
  })

  test('without q: every account, newest first; the defaults are page 0 and page_size 20', async () => {
    const { account } = await createAccount('Newest of all')
    const all = await admin('GET', '/admin/accounts')
    expect(all.status).toBe(200)
    expect(all.body.page).toBe(0)
    expect(all.body.page_size).toBe(20)
    expect(all.body.data[0].id).toBe(account.id)
    expect(all.body.total).toBeGreaterThanOrEqual(1)
    const times = all.body.data.map((a: { created_at: string }) => a.created_at)
    expect([...times].sort().reverse()).toEqual(times)
    for (const a of all.body.data) {
      expect(a.id).toMatch(ID('acct'))
      expect(a.created_at).toMatch(ISO_MS)
      expect(Object.keys(a.usage).sort()).toEqual(['activations', 'active_keys', 'api_keys', 'keys', 'products'])
    }
  })

  test('q: a case-insensitive prefix of the name or a prefix of the id; nothing else, no wildcards', async () => {
    const acme = (await createAccount('AcmeCorp Search')).account
    const other = (await createAccount('Other acmecorp')).account
    const ids = async (q: string) =>
      ((await admin('GET', `/admin/accounts?q=${encodeURIComponent(q)}`)).body.data as { id: string }[]).map((a) => a.id)
    expect(await ids('acmecorp')).toEqual([acme.id]) // a prefix, not a substring: "Other acmecorp" is not listed
    expect(await ids('ACMECORP s')).toEqual([acme.id])
    expect(await ids('other ACME')).toEqual([other.id])
    expect(await ids(acme.id)).toEqual([acme.id])
    expect(await ids(acme.id.slice(0, 20))).toEqual([acme.id])
    expect(await ids(acme.id.toLowerCase())).toEqual([]) // ids are case-sensitive
    expect(await ids('acme%')).toEqual([])
    expect(await ids('_cme')).toEqual([])
    expect(await ids('no such account')).toEqual([])
    const empty = await admin('GET', '/admin/accounts?q=no%20such%20account')
    expect(empty.body).toEqual({ data: [], page: 0, page_size: 20, total: 0, has_more: false })
  })

  test('bad query parameters are 400; no or a wrong operator token is 401', async () => {
    for (const query of ['page_size=0', 'page_size=101', 'page=-1', 'page=abc', `q=${'x'.repeat(201)}`, 'q=a%00b']) {
      expectProblem(await admin('GET', `/admin/accounts?${query}`), 400, 'invalid_request')
    }
    expectProblem(await h.call('GET', '/admin/accounts'), 401, 'unauthorized')
    expectProblem(await h.call('GET', '/admin/accounts', { token: 'wrong-operator-token-0123456789' }), 401, 'unauthorized')
    // an API key is not the operator token, even a full_access one
    const { api_key } = await createAccount('Not an operator')
    expectProblem(await h.call('GET', '/admin/accounts', { token: api_key.token }), 401, 'unauthorized')
  })
})

describe('POST /admin/accounts/:id/api-keys', () => {
  test('201 with the token once; the key works on its account; api_key.created is emitted without the token', async () => {
    const { account } = await createAccount('Lost its keys')
    const res = await admin('POST', `/admin/accounts/${account.id}/api-keys`, { name: 'Recovered', scope: 'full_access' })
    expect(res.status).toBe(201)
    expect(res.body).toEqual(newApiKeyShape('Recovered', 'full_access', res.body.token))
    const ping = await h.call('GET', '/v1/ping', { token: res.body.token })
    expect(ping.body).toEqual({ status: 'ok', accountId: account.id, accountName: 'Lost its keys' })
    const listed = await h.call('GET', '/v1/api-keys', { token: res.body.token })
    expect(listed.body.data.map((k: { id: string }) => k.id)).toContain(res.body.id)

    const { token: _token, ...withoutToken } = res.body
    const events = await eventsOf(h, account.id, 'api_key.created')
    expect(events.map((e) => e.data)).toEqual([withoutToken])
    expect(JSON.stringify(events)).not.toContain(res.body.token)
  })

  test('any scope; the key is limited to it', async () => {
    const { account } = await createAccount('Scoped recovery')
    const res = await admin('POST', `/admin/accounts/${account.id}/api-keys`, { name: 'reader', scope: 'products:read' })
    expect(res.status).toBe(201)
    expect(res.body.scope).toBe('products:read')
    expect((await h.call('GET', '/v1/products', { token: res.body.token })).status).toBe(200)
    expectProblem(await h.call('GET', '/v1/api-keys', { token: res.body.token }), 403, 'insufficient_scope')
  })

  test('unknown or malformed account 404, bad body 400, no operator token 401; nothing is created', async () => {
    const { account, api_key } = await createAccount('Refusals')
    const ghost = `acct_${'0'.repeat(26)}`
    expectProblem(await admin('POST', `/admin/accounts/${ghost}/api-keys`, { name: 'x', scope: 'validate' }), 404, 'not_found')
    expectProblem(await admin('POST', '/admin/accounts/nope/api-keys', { name: 'x', scope: 'validate' }), 404, 'not_found')
    for (const body of [{}, { name: 'x' }, { scope: 'validate' }, { name: '', scope: 'validate' }, { name: 'x', scope: 'root' }]) {
      expectProblem(await admin('POST', `/admin/accounts/${account.id}/api-keys`, body), 400, 'invalid_request')
    }
    expectProblem(await h.call('POST', `/admin/accounts/${account.id}/api-keys`, { body: { name: 'x', scope: 'validate' } }), 401)
    expectProblem(
      await h.call('POST', `/admin/accounts/${account.id}/api-keys`, { token: api_key.token, body: { name: 'x', scope: 'validate' } }),
      401,
    )
    const keys = await h.call('GET', '/v1/api-keys', { token: api_key.token })
    expect(keys.body.data).toHaveLength(1)
    expect(await eventsOf(h, account.id, 'api_key.created')).toHaveLength(0)
  })
})

test('operator routes are 404 when ADMIN_TOKEN is not configured', async () => {
  const off = await startHarness({ ADMIN_TOKEN: undefined })
  try {
    expectProblem(await off.call('GET', '/admin/accounts', { token: ADMIN_TOKEN }), 404, 'not_found')
    expectProblem(
      await off.call('POST', `/admin/accounts/acct_${'0'.repeat(26)}/api-keys`, { token: ADMIN_TOKEN, body: { name: 'x', scope: 'validate' } }),
      404,
      'not_found',
    )
  } finally {
    await off.close()
  }
}, 120_000) // a second node on its own store: slow to start when embedded

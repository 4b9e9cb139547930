// The operator routes (/admin/accounts): happy paths field by field, and their refusals.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ghostId, ID, insertActivation, ISO_MS, secondNode } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

describe('operator', () => {
  test('POST /admin/accounts: plan defaults to free; the first API key is full_access with a token', async () => {
    const res = await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Acme' } })
    expect(res.status).toBe(201)
    const { account, api_key } = res.body
    expect(account).toEqual({ id: expect.stringMatching(ID('acct')), name: 'Acme', plan: 'free', created_at: expect.stringMatching(ISO_MS) })
    expect(api_key).toMatchObject({ id: expect.stringMatching(ID('ak')), scope: 'full_access', created_at: expect.stringMatching(ISO_MS) })
    expect(api_key.token).toMatch(/^kw_[A-Za-z0-9]{32}$/)
    expect(typeof api_key.name).toBe('string')
    const ping = await h.call('GET', '/v1/ping', { token: api_key.token })
    expect(ping.body).toEqual({ status: 'ok', accountId: account.id, accountName: 'Acme' })
  })

  test('GET /admin/accounts/:id has usage counts; PATCH renames and changes plan (emits account.plan_changed once)', async () => {
    const { id, token } = await h.account('starter')
    const product = await newProduct(h.call, token)
    const k1 = await newKey(h.call, token, product.id)
    await newKey(h.call, token, product.id)
    await h.call('POST', `/v1/keys/${k1.id}/revoke`, { token })
    await insertActivation(h, k1, id)
    const got = await h.call('GET', `/admin/accounts/${id}`, { token: ADMIN_TOKEN })
    expect(got.status).toBe(200)
    expect(got.body).toMatchObject({ id, plan: 'starter', usage: { products: 1, keys: 2, active_keys: 1, activations: 1, api_keys: 1 } })

    const renamed = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { name: 'Renamed' } })
    expect(renamed.status).toBe(200)
    expect(renamed.body).toMatchObject({ id, name: 'Renamed', plan: 'starter' })
    expect(await eventsOf(h, id, 'account.plan_changed')).toHaveLength(0)

    const upgraded = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'enterprise' } })
    expect(upgraded.body).toMatchObject({ id, name: 'Renamed', plan: 'enterprise' })
    const same = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'enterprise' } })
    expect(same.status).toBe(200)
    const events = await eventsOf(h, id, 'account.plan_changed')
    expect(events.map((e) => e.data)).toEqual([{ account_id: id, previous_plan: 'starter', plan: 'enterprise' }])
  })
})

describe('400 invalid_request', () => {
  test('operator routes validate too', async () => {
    expectProblem(await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'x', plan: 'platinum' } }), 400)
    expectProblem(await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: {} }), 400)
    const { id } = await h.account()
    expectProblem(await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'gold' } }), 400)
  })
})

describe('404 not_found', () => {
  test('operator routes are 404 when ADMIN_TOKEN is not configured', async () => {
    const other = await secondNode(h, { ADMIN_TOKEN: undefined })
    try {
      expectProblem(await other.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'x' } }), 404, 'not_found')
      expectProblem(await other.call('GET', `/admin/accounts/${ghostId('acct')}`, { token: ADMIN_TOKEN }), 404, 'not_found')
    } finally {
      await other.stop()
    }
  })
})

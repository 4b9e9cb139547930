// The license key routes' happy paths over the app, checked field by field against the contract, and
// their refusals (bad list parameters, revoke and extend bodies, extending a revoked key).
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ID, inDays, insertActivation, ISO_MS, KEY_VALUE } from '../support/helpers'

setDefaultTimeout(30_000) // two shared cores: a slow start is not a failure

const h = useHarness({ socket: false })

describe('license keys', () => {
  test('POST /v1/keys → 201 key object with defaults, key_value once, key_prefix = first 5 characters', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const res = await h.call('POST', '/v1/keys', { token, body: { product_id: p.id } })
    expect(res.status).toBe(201)
    expect(res.body).toEqual({
      id: expect.stringMatching(ID('key')),
      product_id: p.id,
      plan: null,
      status: 'active',
      activation_limit: 3,
      activations_used: 0,
      expires_at: null,
      created_at: expect.stringMatching(ISO_MS),
      revoked_at: null,
      revoke_reason: null,
      suspended_at: null,
      suspend_reason: null,
      suspended_until: null,
      metadata: {},
      key_prefix: res.body.key_value.slice(0, 5),
      release_after_seconds: null,
      deactivations_allowed: null,
      deactivations_used: 0,
      entitlements: {},
      grace_seconds: 0,
      after_expiry: 'refuse',
      component_match: 'off',
      policy_id: null,
      expiry_pending: false,
      external_id: null,
      overrides: {},
      credits: null,
      customer: null,
      key_value: expect.stringMatching(KEY_VALUE),
    })
    const { key_value, ...key } = res.body
    const events = await eventsOf(h, id, 'key.created')
    expect(events.map((e) => e.data)).toEqual([key])
    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(detail.body.key_value).toBeUndefined()
    expect(JSON.stringify(detail.body)).not.toContain(key_value)
  })

  test('POST /v1/keys with every field', async () => {
    const { token } = await h.account()
    const p = await newProduct(h.call, token)
    const expires = new Date(Date.now() + 30 * 86_400_000)
    const body = { product_id: p.id, plan: 'pro', activation_limit: 10000, expires_at: expires.toISOString().replace('Z', '+00:00'), metadata: { seat: 'A1', n: 2 } }
    const res = await h.call('POST', '/v1/keys', { token, body })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({ plan: 'pro', activation_limit: 10000, expires_at: expires.toISOString(), metadata: { seat: 'A1', n: 2 } })
  })

  test('GET /v1/keys: newest first, paged, filtered by product, status (effective) and plan', async () => {
    const { token } = await h.account()
    const p1 = await newProduct(h.call, token)
    const p2 = await newProduct(h.call, token)
    const k1 = await newKey(h.call, token, p1.id, { plan: 'basic' })
    const k2 = await newKey(h.call, token, p1.id, { plan: 'pro' })
    const k3 = await newKey(h.call, token, p2.id, { plan: 'pro' })
    const k4 = await newKey(h.call, token, p2.id)
    await h.call('POST', `/v1/keys/${k2.id}/revoke`, { token })
    // stored status still active, but past expires_at: effectively expired everywhere
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 second' where id = ${k3.id}`

    const all = await h.call('GET', '/v1/keys', { token })
    expect(all.status).toBe(200)
    expect(all.body).toMatchObject({ page: 0, page_size: 20, total: 4, has_more: false })
    expect(all.body.data.map((k: { id: string }) => k.id)).toEqual([k4.id, k3.id, k2.id, k1.id])
    expect(all.body.data[1].status).toBe('expired')

    const page0 = await h.call('GET', '/v1/keys?page_size=3', { token })
    expect(page0.body).toMatchObject({ page: 0, page_size: 3, total: 4, has_more: true })
    expect(page0.body.data).toHaveLength(3)
    const page1 = await h.call('GET', '/v1/keys?page_size=3&page=1', { token })
    expect(page1.body).toMatchObject({ page: 1, page_size: 3, total: 4, has_more: false })
    expect(page1.body.data.map((k: { id: string }) => k.id)).toEqual([k1.id])
    const beyond = await h.call('GET', '/v1/keys?page=50', { token })
    expect(beyond.body).toMatchObject({ data: [], total: 4, has_more: false })

    const ids = async (q: string) => (await h.call('GET', `/v1/keys?${q}`, { token })).body.data.map((k: { id: string }) => k.id)
    expect(await ids(`product_id=${p1.id}`)).toEqual([k2.id, k1.id])
    expect(await ids('status=active')).toEqual([k4.id, k1.id])
    expect(await ids('status=expired')).toEqual([k3.id])
    expect(await ids('status=revoked')).toEqual([k2.id])
    expect(await ids('plan=pro')).toEqual([k3.id, k2.id])
    expect(await ids(`plan=pro&product_id=${p2.id}&status=expired`)).toEqual([k3.id])
    // an unknown (or malformed) product_id is a filter that matches nothing, not an error
    expect(await ids('product_id=prod_00000000000000000000000000')).toEqual([])
    expect(await ids('product_id=nonsense')).toEqual([])
  })

  test('GET /v1/keys?key_prefix: keys whose value starts with those characters, in this account only', async () => {
    const { token } = await h.account()
    const other = await h.account()
    const p = await newProduct(h.call, token)
    const keys: any[] = []
    for (let i = 0; i < 6; i++) keys.push(await newKey(h.call, token, p.id, i % 2 ? { plan: 'pro' } : {}))
    // The same key value's prefix in another account must not leak into this one's list.
    await newKey(h.call, other.token, (await newProduct(h.call, other.token)).id)
    const list = async (q: string, t = token) => {
      const res = await h.call('GET', `/v1/keys?${q}`, { token: t })
      expect(res.status).toBe(200)
      return res.body
    }
    const newestFirst = [...keys].reverse()
    for (const k of keys) {
      expect(k.key_prefix).toBe(k.key_value.slice(0, 5))
      // The whole prefix finds the key (and only keys that share all five characters).
      const whole = await list(`key_prefix=${k.key_prefix}`)
      expect(whole.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.filter((x) => x.key_prefix === k.key_prefix).map((x) => x.id))
      expect(whole.total).toBe(whole.data.length)
      // One to four characters: every key of the account starting with them, newest first.
      for (const n of [1, 2, 4]) {
        const start = k.key_prefix.slice(0, n)
        const found = await list(`key_prefix=${start}&page_size=100`)
        expect(found.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.filter((x) => x.key_prefix.startsWith(start)).map((x) => x.id))
        expect(found.data.every((x: { key_prefix: string }) => x.key_prefix.startsWith(start))).toBe(true)
      }
    }
    // Combined with the other filters and paging.
    const first = keys[1]
    const combined = await list(`key_prefix=${first.key_prefix}&plan=pro&status=active&product_id=${p.id}&page_size=1`)
    expect(combined.data.map((x: { id: string }) => x.id)).toEqual([first.id])
    expect(combined).toMatchObject({ page: 0, page_size: 1, total: 1, has_more: false })
    expect((await list(`key_prefix=${first.key_prefix}&plan=nope`)).data).toEqual([])
    // A prefix no key of this account has: an empty page.
    const unused = ['00000', 'ZZZZZ', 'Z0Z0Z'].find((x) => !keys.some((k) => k.key_prefix === x))!
    expect(await list(`key_prefix=${unused}`)).toMatchObject({ data: [], total: 0, has_more: false })
  })

  test('GET /v1/keys?key_prefix: anything but 1 to 5 characters of the key alphabet is 400', async () => {
    const { token } = await h.account()
    const key = await newKey(h.call, token, (await newProduct(h.call, token)).id)
    const bad = ['', 'abcde', 'a', key.key_value.slice(0, 6), key.key_value.slice(0, 7), 'ABCDEF', 'I', 'L', 'O', 'U', 'A%', '_', 'AB-C', 'A B', '%25', 'Ä']
    for (const value of bad) {
      const res = await h.call('GET', `/v1/keys?key_prefix=${encodeURIComponent(value)}`, { token })
      const problem = expectProblem(res, 400, 'invalid_request')
      expect(problem.errors[0].field).toMatch(/^query(\.key_prefix|$)/)
    }
    // (Lower case is refused rather than silently matching nothing: key_prefix is stored upper case.)
    expect((await h.call('GET', `/v1/keys?key_prefix=${key.key_prefix}`, { token })).body.total).toBe(1)
  })

  test('GET /v1/keys/:id: the key plus its full activation history, oldest first', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id)
    const a1 = await insertActivation(h, key, id, { status: 'deactivated' })
    const a2 = await insertActivation(h, key, id)
    const res = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(res.status).toBe(200)
    const { key_value, ...expected } = key
    expect(res.body).toMatchObject({ ...expected, activations_used: 1 })
    expect(res.body.activations.map((a: { id: string }) => a.id)).toEqual([a1, a2])
    expect(Object.keys(res.body.activations[0]).sort()).toEqual(
      ['activated_at', 'app_version', 'components', 'components_changed_at', 'country', 'deactivated_at', 'deactivation_reason', 'device_fingerprint', 'device_name', 'id', 'last_validated_at', 'offline', 'replaced_fingerprints', 'status'],
    )
    expect(res.body.activations[0]).toMatchObject({ status: 'deactivated', deactivation_reason: 'user', deactivated_at: expect.stringMatching(ISO_MS) })
    expect(res.body.activations[1]).toMatchObject({ status: 'active', deactivated_at: null, deactivation_reason: null })
  })

  test('POST /v1/keys/:id/revoke → 200 revoked with reason; revoking again changes nothing and emits nothing', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id)
    const res = await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'chargeback' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: key.id, status: 'revoked', revoke_reason: 'chargeback', revoked_at: expect.stringMatching(ISO_MS) })
    expect(res.body.key_value).toBeUndefined()
    const again = await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'other' } })
    expect(again.status).toBe(200)
    expect(again.body).toEqual(res.body)
    const events = await eventsOf(h, id, 'key.revoked')
    expect(events.map((e) => e.data)).toEqual([res.body])
    const noBody = await h.call('POST', `/v1/keys/${(await newKey(h.call, token, p.id)).id}/revoke`, { token })
    expect(noBody.status).toBe(200)
    expect(noBody.body).toMatchObject({ status: 'revoked', revoke_reason: null })
  })

  test('POST /v1/keys/:id/extend: new expiry, perpetual with null, an expired key becomes active; emits key.extended', async () => {
    const { id, token } = await h.account()
    const p = await newProduct(h.call, token)
    const key = await newKey(h.call, token, p.id, { expires_at: inDays(1) })
    const later = inDays(60)
    const res = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: later } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ id: key.id, status: 'active', expires_at: later })
    const perpetual = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: null } })
    expect(perpetual.body).toMatchObject({ status: 'active', expires_at: null })

    // expired both by time only and by the sweeper's stored status
    for (const stored of ['active', 'expired']) {
      await h.node.deps.sql`update license_keys set status = ${stored}, expires_at = now() - interval '1 hour' where id = ${key.id}`
      expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('expired')
      const revived = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: later } })
      expect(revived.status).toBe(200)
      expect(revived.body).toMatchObject({ status: 'active', expires_at: later })
    }
    expect(await eventsOf(h, id, 'key.extended')).toHaveLength(4)
  })
})

describe('400 invalid_request', () => {
  test('bad query parameters: page_size > 100, page < 0, unknown status', async () => {
    const { token } = await h.account()
    for (const q of ['page_size=101', 'page_size=0', 'page=-1', 'page=abc', 'page=1.5', 'status=foo', 'status=', 'page=99999999999999999999']) {
      const problem = expectProblem(await h.call('GET', `/v1/keys?${q}`, { token }), 400, 'invalid_request')
      // Elysia drops the parameter's name on range errors: the field is `query` or `query.<name>`.
      expect(problem.errors[0].field).toMatch(/^query(\.|$)/)
    }
  })

  test('revoke reason over 500 characters; extend without expires_at or in the past', async () => {
    const { token } = await h.account()
    const key = await newKey(h.call, token, (await newProduct(h.call, token)).id)
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'r'.repeat(501) } }), 400)
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: {} }), 400)
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: '2001-01-01T00:00:00.000Z' } }), 400)
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.status).toBe('active')
  })
})

describe('409', () => {
  test('key_revoked: extending a revoked key', async () => {
    const { token } = await h.account()
    const key = await newKey(h.call, token, (await newProduct(h.call, token)).id)
    await h.call('POST', `/v1/keys/${key.id}/revoke`, { token })
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: inDays(10) } }), 409, 'key_revoked')
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body).toMatchObject({ status: 'revoked', expires_at: null })
  })
})

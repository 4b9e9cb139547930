// PATCH /v1/keys/:id and the key settings added with it (release_after_seconds, deactivations_allowed):
// what changes, what is refused (bounds, other accounts, scopes), when key.updated is written, and
// that the next validate sees a new activation_limit.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { eventsOf, expectProblem, ghostId } from '../support/helpers'
import { fingerprint, setup, validate } from '../validation/support'

setDefaultTimeout(30_000) // two shared cores: a slow start is not a failure

const h = useHarness() // a socket: the tests validate through the fast path

const patch = (token: string, id: string, body: unknown) => h.call('PATCH', `/v1/keys/${id}`, { token, body })
// the key object as PATCH answers it: the detail without its activations and relays
const get = async (token: string, id: string) => {
  const { activations: _, relays: __, ...key } = (await h.call('GET', `/v1/keys/${id}`, { token })).body
  return key
}

describe('PATCH /v1/keys/:id', () => {
  test('changes every setting; the answer, GET and the one key.updated event agree', async () => {
    const { accountId, token, key } = await setup(h, { plan: 'basic', metadata: { a: 1 } })
    const res = await patch(token, key.id, {
      plan: 'pro',
      activation_limit: 7,
      metadata: { seat: 'B2' },
      release_after_seconds: 3600,
      deactivations_allowed: 2,
    })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      id: key.id,
      status: 'active',
      plan: 'pro',
      activation_limit: 7,
      metadata: { seat: 'B2' }, // replaced, not merged: `a` is gone
      release_after_seconds: 3600,
      deactivations_allowed: 2,
      deactivations_used: 0,
    })
    expect(res.body.key_value).toBeUndefined()
    expect(await get(token, key.id)).toEqual(res.body)
    const updated = await eventsOf(h, accountId, 'key.updated')
    expect(updated.map((e) => e.data)).toEqual([res.body])

    // back to "never" and "unlimited", plan removed
    const cleared = await patch(token, key.id, { plan: null, release_after_seconds: null, deactivations_allowed: null })
    expect(cleared.body).toMatchObject({ plan: null, release_after_seconds: null, deactivations_allowed: null, activation_limit: 7 })
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(2)
  })

  test('{}, the same values again and unknown fields: 200, nothing changes, no event', async () => {
    const { accountId, token, key } = await setup(h, { metadata: { b: 1, a: [1, 2] }, release_after_seconds: 60 })
    const before = await get(token, key.id)
    for (const body of [{}, { activation_limit: before.activation_limit, metadata: { a: [1, 2], b: 1 }, release_after_seconds: 60 }, { status: 'revoked', expires_at: '2000-01-01T00:00:00Z', deactivations_used: 9 }]) {
      const res = await patch(token, key.id, body)
      expect(res.status).toBe(200)
      expect(res.body).toEqual(before)
    }
    expect(await get(token, key.id)).toEqual(before)
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(0)
  })

  test('bounds: out-of-range or mistyped values are 400 and change nothing; the limits themselves are accepted', async () => {
    const { accountId, token, key } = await setup(h)
    const before = await get(token, key.id)
    const bad = [
      { release_after_seconds: 59 },
      { release_after_seconds: 31536001 },
      { release_after_seconds: 90.5 },
      { release_after_seconds: '3600' },
      { deactivations_allowed: -1 },
      { deactivations_allowed: 10001 },
      { activation_limit: 0 },
      { activation_limit: 10001 },
      { activation_limit: null },
      { metadata: [1] },
      { metadata: 'x' },
      { metadata: null },
      { metadata: { big: 'x'.repeat(9000) } },
      { plan: 'p'.repeat(65) },
      { activation_limit: 5, release_after_seconds: 1 }, // one bad field refuses the whole patch
    ]
    for (const body of bad) {
      const res = await patch(token, key.id, body)
      expectProblem(res, 400, 'invalid_request')
    }
    expect(await get(token, key.id)).toEqual(before)
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(0)

    for (const body of [
      { release_after_seconds: 60, deactivations_allowed: 0, activation_limit: 1 },
      { release_after_seconds: 31536000, deactivations_allowed: 10000, activation_limit: 10000 },
    ]) {
      const res = await patch(token, key.id, body)
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject(body)
    }
  })

  test('POST /v1/keys takes release_after_seconds and deactivations_allowed, with the same bounds', async () => {
    const { token } = await setup(h)
    const product = await newProduct(h.call, token)
    const key = await newKey(h.call, token, product.id, { release_after_seconds: 120, deactivations_allowed: 0 })
    expect(key).toMatchObject({ release_after_seconds: 120, deactivations_allowed: 0, deactivations_used: 0 })
    expect(await get(token, key.id)).toMatchObject({ release_after_seconds: 120, deactivations_allowed: 0 })
    for (const extra of [{ release_after_seconds: 59 }, { deactivations_allowed: 10001 }, { release_after_seconds: 0 }]) {
      expectProblem(await h.call('POST', '/v1/keys', { token, body: { product_id: product.id, ...extra } }), 400, 'invalid_request')
    }
  })

  test('404 for an unknown, malformed or other account\'s key (which stays as it was); 403 without keys:write', async () => {
    const a = await setup(h)
    const b = await setup(h)
    expectProblem(await patch(a.token, ghostId('key'), { activation_limit: 5 }), 404, 'not_found')
    expectProblem(await patch(a.token, 'nope', { activation_limit: 5 }), 404, 'not_found')
    expectProblem(await patch(a.token, b.key.id, { activation_limit: 5 }), 404, 'not_found')
    expect((await get(b.token, b.key.id)).activation_limit).toBe(3)
    expect(await eventsOf(h, b.accountId, 'key.updated')).toHaveLength(0)
    const reader = await scopedToken(h.call, a.token, 'keys:read')
    expectProblem(await patch(reader, a.key.id, { activation_limit: 5 }), 403)
    const writer = await scopedToken(h.call, a.token, 'keys:write')
    expect((await patch(writer, a.key.id, { activation_limit: 5 })).body.activation_limit).toBe(5)
  })

  test('a revoked key takes new settings and stays revoked', async () => {
    const { accountId, token, key } = await setup(h)
    await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'refund' } })
    const res = await patch(token, key.id, { metadata: { note: 'refunded on request' }, activation_limit: 9 })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ status: 'revoked', revoke_reason: 'refund', metadata: { note: 'refunded on request' }, activation_limit: 9 })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fingerprint() })).body).toEqual({ valid: false, reason: 'revoked' })
    expect(await eventsOf(h, accountId, 'key.updated')).toHaveLength(1)
  })

  test('lowering activation_limit below the devices in use deactivates none; new devices wait for a free slot', async () => {
    const { token, key } = await setup(h, { activation_limit: 2 })
    const [d1, d2, d3] = [fingerprint(), fingerprint(), fingerprint()]
    for (const d of [d1, d2]) expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(true)

    const lowered = await patch(token, key.id, { activation_limit: 1 })
    expect(lowered.body).toMatchObject({ activation_limit: 1, activations_used: 2 })
    for (const d of [d1, d2]) {
      expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body).toMatchObject({
        valid: true,
        activations_used: 2,
        activation_limit: 1,
      })
    }
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d3 })).body).toEqual({ valid: false, reason: 'activation_limit' })
    // one device leaves: still 1 of 1, so the new device still waits
    await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: d1 } })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d3 })).body).toEqual({ valid: false, reason: 'activation_limit' })

    await patch(token, key.id, { activation_limit: 2 })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d3 })).body).toMatchObject({
      valid: true,
      activations_used: 2,
      activation_limit: 2,
    })
  })

  test('plan changes reach the next validate answer', async () => {
    const { token, key } = await setup(h, { plan: 'basic' })
    const d = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.plan).toBe('basic')
    await patch(token, key.id, { plan: 'pro' })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: d })).body.plan).toBe('pro')
  })
})

// Metered keys through the API: `credits` on create, PATCH and policies, POST /v1/keys/:id/credits,
// validate's cost / credits_remaining / credits_exhausted, the two events, refills when next read, and
// bad input (a 400 that spends nothing). Exactness across nodes and faults: test/cluster/credits.test.ts;
// the lease state machine on its own: leases.test.ts.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem } from '../support/helpers'
import { waitUntil } from '../support/wait'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

async function setup(extra: Record<string, unknown> = {}) {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, extra)
  return { accountId: id, token, key, product }
}

const validate = (token: string, body: Record<string, unknown>) => h.call('POST', '/v1/validate', { token, body })
const remainingOf = async (token: string, id: string) => (await h.call('GET', `/v1/keys/${id}`, { token })).body.credits?.remaining

describe('credits on a key', () => {
  test('a metered key spends its cost on each valid answer; credits_exhausted once the balance is below the cost', async () => {
    const { accountId, token, key } = await setup({ credits: { remaining: 5 } })
    expect(key.credits).toEqual({ remaining: 5, refill: null, refills_at: null })
    const device = fingerprint()
    // cost 0 checks without spending, and tells the balance
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 0 })).body).toMatchObject({ valid: true, credits_remaining: 5 })
    const first = await validate(token, { key: key.key_value, device_fingerprint: device, cost: 2 })
    expect(first.body).toMatchObject({ valid: true, credits_remaining: 3, activations_used: 1 })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 0 })).body).toMatchObject({ valid: true })
    const refused = await validate(token, { key: key.key_value, device_fingerprint: device, cost: 4 })
    expect(refused.body).toEqual({ valid: false, reason: 'credits_exhausted', credits_remaining: 3, refills_at: null })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: true })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 2 })).body).toMatchObject({ valid: true, credits_remaining: 0 })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: false, reason: 'credits_exhausted', credits_remaining: 0 })
    // cost 0 checks without spending, at any balance
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 0 })).body).toMatchObject({ valid: true })
    await h.node.deps.validation.credits.flush()
    expect(await remainingOf(token, key.id)).toBe(0)
    // sent once, when the balance reached 0
    expect((await eventsOf(h, accountId, 'key.credits_exhausted')).length).toBe(1)
  })

  test('credits_exhausted on a new device records no activation; an unmetered key answers credits_remaining null and ignores cost', async () => {
    const { token, key } = await setup({ credits: { remaining: 0 } })
    const refused = await validate(token, { key: key.key_value, device_fingerprint: fingerprint() })
    expect(refused.body).toMatchObject({ valid: false, reason: 'credits_exhausted', credits_remaining: 0 })
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.activations).toEqual([])
    const plain = await newKey(h.call, token, key.product_id)
    expect(plain.credits).toBeNull()
    const answer = await validate(token, { key: plain.key_value, device_fingerprint: fingerprint(), cost: 1_000_000 })
    expect(answer.body).toMatchObject({ valid: true, credits_remaining: null })
  })

  test('POST /v1/keys/:id/credits adds, subtracts (stopping at 0) and sets, in force at once; key.credits_updated each time', async () => {
    const { accountId, token, key } = await setup({ credits: { remaining: 10 } })
    const device = fingerprint()
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 4 })).body).toMatchObject({ valid: true })
    const added = await h.call('POST', `/v1/keys/${key.id}/credits`, { token, body: { operation: 'add', amount: 5 } })
    expect(added.status).toBe(200)
    expect(added.body.credits.remaining).toBe(11)
    const subtracted = await h.call('POST', `/v1/keys/${key.id}/credits`, { token, body: { operation: 'subtract', amount: 100 } })
    expect(subtracted.body.credits.remaining).toBe(0)
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: false, reason: 'credits_exhausted' })
    const set = await h.call('POST', `/v1/keys/${key.id}/credits`, { token, body: { operation: 'set', amount: 3 } })
    expect(set.body.credits.remaining).toBe(3)
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 3 })).body).toMatchObject({ valid: true, credits_remaining: 0 })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: false, reason: 'credits_exhausted' })
    const events = await eventsOf(h, accountId, 'key.credits_updated')
    expect(events.map((e) => e.data.credits.remaining)).toEqual([11, 0, 3])
    // sent for the consume that reached 0, not for the subtract that did
    expect((await eventsOf(h, accountId, 'key.credits_exhausted')).length).toBe(1)
  })

  test('an unmetered key is 409 key_unmetered; bad amounts are 400 and change nothing', async () => {
    const { token, key } = await setup()
    expectProblem(await h.call('POST', `/v1/keys/${key.id}/credits`, { token, body: { operation: 'add', amount: 5 } }), 409, 'key_unmetered')
    const metered = await newKey(h.call, token, key.product_id, { credits: { remaining: 7 } })
    for (const body of [
      { operation: 'add', amount: 0 },
      { operation: 'add', amount: -1 },
      { operation: 'subtract', amount: 1.5 },
      { operation: 'set', amount: 1_000_000_000_001 },
      { operation: 'double', amount: 2 },
      { operation: 'set' },
    ]) {
      expectProblem(await h.call('POST', `/v1/keys/${metered.id}/credits`, { token, body }), 400, 'invalid_request')
    }
    expectProblem(await h.call('POST', '/v1/keys/key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I/credits', { token, body: { operation: 'add', amount: 1 } }), 404, 'not_found')
    expect(await remainingOf(token, metered.id)).toBe(7)
  })

  test('validate: a cost that is negative, fractional, over 1,000,000 or not a number is 400 and spends nothing', async () => {
    const { token, key } = await setup({ credits: { remaining: 5 } })
    const device = fingerprint()
    for (const cost of [-1, 1.5, 1_000_001, '1', null]) {
      expectProblem(await validate(token, { key: key.key_value, device_fingerprint: device, cost }), 400, 'invalid_request')
    }
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 1_000_000 })).body).toMatchObject({
      valid: false, reason: 'credits_exhausted', credits_remaining: 5,
    })
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token })).body.activations).toEqual([])
    await h.node.deps.validation.credits.flush()
    expect(await remainingOf(token, key.id)).toBe(5)
  })

  test('PATCH sets the balance and the rule, or null (unmetered); bad credits are 400', async () => {
    const { token, key } = await setup()
    const device = fingerprint()
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: true, credits_remaining: null })
    const metered = await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { credits: { remaining: 1, refill: { amount: 50, interval: 'month', day_of_month: 31 } } } })
    expect(metered.status).toBe(200)
    expect(metered.body.credits).toMatchObject({ remaining: 1, refill: { amount: 50, interval: 'month', day_of_month: 31, mode: 'top_up' } })
    expect(Date.parse(metered.body.credits.refills_at)).toBeGreaterThan(Date.now())
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: true, credits_remaining: 0 })
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({
      valid: false, reason: 'credits_exhausted', refills_at: metered.body.credits.refills_at,
    })
    for (const credits of [
      { remaining: -1 },
      { remaining: 1, refill: { amount: 5, interval: 'day', day_of_month: 3 } },
      { remaining: 1, refill: { amount: 0, interval: 'day' } },
      { remaining: 1, refill: { amount: 5, interval: 'week' } },
      { remaining: 1, refill: { amount: 5, interval: 'month', day_of_month: 32 } },
    ]) {
      expectProblem(await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { credits } }), 400, 'invalid_request')
    }
    const unmetered = await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { credits: null } })
    expect(unmetered.body.credits).toBeNull()
    expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body).toMatchObject({ valid: true, credits_remaining: null })
  })

  test('a policy\'s credits are copied into keys created afterwards; editing them moves no balance', async () => {
    const { token, product } = await setup()
    const policy = await h.call('POST', '/v1/policies', {
      token, body: { product_id: product.id, name: 'Metered', credits: { initial: 100, refill: { amount: 100, interval: 'day', mode: 'add' } } },
    })
    expect(policy.status).toBe(201)
    expect(policy.body.credits).toEqual({ initial: 100, refill: { amount: 100, interval: 'day', day_of_month: null, mode: 'add' } })
    const key = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.body.id } })).body
    expect(key.credits).toMatchObject({ remaining: 100, refill: { amount: 100, interval: 'day', mode: 'add' } })
    const own = (await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.body.id, credits: null } })).body
    expect(own.credits).toBeNull()
    const edited = await h.call('PATCH', `/v1/policies/${policy.body.id}`, { token, body: { credits: { initial: 5 } } })
    expect(edited.body.credits).toEqual({ initial: 5, refill: null })
    expect(await remainingOf(token, key.id)).toBe(100)
    expect((await h.call('POST', '/v1/keys', { token, body: { policy_id: policy.body.id } })).body.credits).toEqual({ remaining: 5, refill: null, refills_at: null })
  })

  test('refills are computed from the period boundary when next read: top_up and add', async () => {
    const { token, key } = await setup({ credits: { remaining: 2, refill: { amount: 10, interval: 'day' } } })
    const added = await newKey(h.call, token, key.product_id, { credits: { remaining: 2, refill: { amount: 10, interval: 'day', mode: 'add' } } })
    // three boundaries passed since the rule was set
    const sql = h.node.deps.sql
    await sql`update license_keys set credits_since = now() - interval '3 days' where id in ${sql([key.id, added.id])}`
    expect(await remainingOf(token, key.id)).toBe(10)
    expect(await remainingOf(token, added.id)).toBe(32)
    const device = fingerprint()
    expect((await validate(token, { key: key.key_value, device_fingerprint: device, cost: 10 })).body).toMatchObject({ valid: true, credits_remaining: 0 })
    expect((await validate(token, { key: added.key_value, device_fingerprint: device, cost: 32 })).body).toMatchObject({ valid: true, credits_remaining: 0 })
    // applied once: reading again adds nothing
    await h.node.deps.validation.credits.flush()
    expect(await remainingOf(token, key.id)).toBe(0)
    expect(await remainingOf(token, added.id)).toBe(0)
  })

  test('GET /v1/keys/:id shows what the node spent from its lease after a flush', async () => {
    const { token, key } = await setup({ credits: { remaining: 1000 } })
    const device = fingerprint()
    for (let i = 0; i < 30; i++) expect((await validate(token, { key: key.key_value, device_fingerprint: device })).body.valid).toBe(true)
    await waitUntil(async () => (await remainingOf(token, key.id)) === 970)
    // and the analytics count what was consumed, for the key and for its product
    await h.node.deps.validation.credits.flush()
    const today = (await h.call('GET', `/v1/analytics/credits?range=7d&key_id=${key.id}`, { token })).body
    expect(today.length).toBe(7)
    expect(today.at(-1).consumed).toBe(30)
    const product = (await h.call('GET', `/v1/analytics/credits?product_id=${key.product_id}`, { token })).body
    expect(product.length).toBe(30)
    expect(product.at(-1).consumed).toBe(30)
    expectProblem(await h.call('GET', '/v1/analytics/credits?key_id=key_01JD7Z3X9K8Q4W2E6R5T1Y0U3I', { token }), 404, 'not_found')
  })
})

// api_calls_today is the number of validate calls made today (valid or not; a 400 is not a call),
// across nodes when Redis is configured; and an activation created by validate shows up in every
// figure at once, with the country from the request header.
import { afterAll, expect, test } from 'bun:test'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { client, fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { analytics } from './fixtures'

const extraNodes: Node[] = []
afterAll(async () => {
  for (const n of extraNodes) await n.stop()
}) // registered before the harness: these nodes stop before its database goes
const h = useHarness()

const device = fingerprint
// A cluster shares counters through Redis; the embedded counters are per process by design.
const cluster = !!(process.env.REDIS_URL && process.env.DATABASE_URL)

async function apiCallsToday(token: string, call = h.call): Promise<number> {
  const res = await call('GET', '/v1/analytics/overview', { token })
  expect(res.status).toBe(200)
  return res.body.api_calls_today
}

test(`api_calls_today counts every validate call that passed request validation${cluster ? ', across two nodes' : ''}`, async () => {
  const { token } = await h.account('growth')
  const validator = await scopedToken(h.call, token, 'validate')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { activation_limit: 1 })
  const calls = [h.call]
  if (cluster) {
    const second = await startNode(h.config, { log: createLogger(h.config.logLevel) })
    extraNodes.push(second)
    calls.push(client(second.url))
  }
  const fp = device()
  let counted = 0
  for (let i = 0; i < 30; i++) {
    const call = calls[i % calls.length]
    // valid, activation_limit, not_found: all count
    const body = i % 3 === 0 ? { key: key.key_value, device_fingerprint: fp }
      : i % 3 === 1 ? { key: key.key_value, device_fingerprint: device() }
      : { key: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE', device_fingerprint: fp }
    const res = await call('POST', '/v1/validate', { token: validator, body })
    expect(res.status).toBe(200)
    counted++
  }
  // malformed requests are 400 and do not count
  for (const body of [{ key: key.key_value }, { key: key.key_value, device_fingerprint: 'xyz' }, {}]) {
    expect((await h.call('POST', '/v1/validate', { token: validator, body })).status).toBe(400)
  }
  // every node sees the total once the others have flushed (within FLUSH_INTERVAL_MS)
  for (const call of calls) {
    const until = Date.now() + 10_000
    let seen = await apiCallsToday(token, call)
    while (seen !== counted && Date.now() < until) {
      await Bun.sleep(100)
      seen = await apiCallsToday(token, call)
    }
    expect(seen).toBe(counted)
  }
})

test('an activation made by validate is in every figure at once, with its country', async () => {
  const { token } = await h.account('starter')
  const validator = await scopedToken(h.call, token, 'validate')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id)
  const before = (await analytics(h, token, 'overview')).body
  expect(before).toMatchObject({ total_activations: 0, activations_today: 0 })
  for (const country of ['de', 'DE', 'XYZ']) {
    const res = await h.call('POST', '/v1/validate', {
      token: validator,
      body: { key: key.key_value, device_fingerprint: device() },
      headers: { [h.config.countryHeader]: country },
    })
    expect(res.body.valid).toBe(true)
  }
  const after = (await analytics(h, token, 'overview')).body
  expect(after).toMatchObject({ total_activations: 3, activations_today: 3, active_keys: 1, api_calls_today: 3 })
  expect((await analytics(h, token, 'geography')).body).toEqual([{ country: 'DE', activations: 2 }])
  const trend = (await analytics(h, token, `activations?product_id=${product.id}`)).body
  expect(trend.at(-1).activations).toBe(3)
  // a key revoked a moment ago is no longer active
  expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect((await analytics(h, token, 'overview')).body).toMatchObject({ active_keys: 0, total_keys: 1, total_activations: 3 })
})

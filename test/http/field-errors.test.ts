// Every 400 names its field (docs/api.md, "Errors"): bad values deep inside a body (a union of an object
// and null such as `credits`, a refill inside it, a policy's credits) name the field inside, not the
// object around it; across several routes the problem document's errors[] and detail say which field.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, useHarness } from '../support/harness'

setDefaultTimeout(60_000)
const h = useHarness({ socket: false })
let token: string
let productId: string
let keyId: string
let policyId: string

beforeAll(async () => {
  token = (await h.account()).token
  productId = (await newProduct(h.call, token)).id
  keyId = (await newKey(h.call, token, productId)).id
  policyId = (await h.call('POST', '/v1/policies', { token, body: { product_id: productId, name: 'Fields' } })).body.id
})

const fp = 'ab'.repeat(32)
/** [method, path, body, the field the 400 must name] */
const CASES: [string, () => string, unknown, string][] = [
  ['POST', () => '/v1/keys', () => ({ product_id: productId, credits: { remaining: 'lots' } }), 'body.credits.remaining'],
  ['POST', () => '/v1/keys', () => ({ product_id: productId, credits: { remaining: -1 } }), 'body.credits.remaining'],
  ['POST', () => '/v1/keys', () => ({ product_id: productId, credits: { remaining: 5, refill: { amount: 5, interval: 'year' } } }), 'body.credits.refill.interval'],
  ['POST', () => '/v1/keys', () => ({ product_id: productId, credits: { remaining: 5, refill: { amount: 'five', interval: 'day' } } }), 'body.credits.refill.amount'],
  ['PATCH', () => `/v1/keys/${keyId}`, () => ({ credits: { remaining: 1.5 } }), 'body.credits.remaining'],
  ['PATCH', () => `/v1/policies/${policyId}`, () => ({ credits: { initial: 'x' } }), 'body.credits.initial'],
  ['POST', () => '/v1/keys', () => ({ product_id: productId, activation_limit: 0 }), 'body.activation_limit'],
  ['PATCH', () => `/v1/keys/${keyId}`, () => ({ metadata: [1, 2] }), 'body.metadata'],
  ['POST', () => '/v1/products', () => ({ name: 'X', slug: 'Not A Slug' }), 'body.slug'],
  ['POST', () => '/v1/validate', () => ({ key: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE', device_fingerprint: 'short' }), 'body.device_fingerprint'],
  ['POST', () => '/v1/webhooks', () => ({ url: 'https://hooks.example.com/x', events: ['no.such_event'] }), 'body.events.0'],
  ['POST', () => `/v1/keys/${keyId}/extend`, () => ({ expires_at: 'tomorrow' }), 'body.expires_at'],
].map(([m, p, b, f]) => [m as string, p as () => string, b, f as string]) as never

test.each(CASES.map((c, i) => [i, ...c]))('%d: %s %s names the field', async (_i, method, path, body, field) => {
  const res = await h.call(method as string, (path as () => string)(), { token, body: (body as () => unknown)() })
  expect(res.status).toBe(400)
  expect(res.body.code).toBe('invalid_request')
  expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field)
  // the detail says it too, in words or as the path
  expect(res.body.detail).toContain(field.split(".").filter((s) => !/^\d+$/.test(s)).at(-1)!)
  // Nothing changed: the key keeps its credits (none) and metadata.
  const key = (await h.call('GET', `/v1/keys/${keyId}`, { token })).body
  expect(key.credits).toBeNull()
  expect(key.metadata).toEqual({})
})

test('a body that is not an object, or a value of the wrong kind for the whole union, still names the field', async () => {
  const res = await h.call('POST', '/v1/keys', { token, body: { product_id: productId, credits: 'lots' } })
  expect(res.status).toBe(400)
  expect(res.body.errors[0].field).toBe('body.credits')
})

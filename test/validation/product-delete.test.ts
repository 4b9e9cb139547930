import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

const device = 'ab'.repeat(32)

test('deleting a product drops its keys from every node\'s hot state: validate answers not_found at once', async () => {
  const { token } = await h.account('growth')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id)
  const validate = () => h.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })
  expect((await validate()).body.valid).toBe(true)
  expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect((await validate()).body).toEqual({ valid: false, reason: 'revoked' }) // cached as revoked now
  expect((await h.call('DELETE', `/v1/products/${product.id}`, { token })).status).toBe(204)
  expect((await validate()).body).toEqual({ valid: false, reason: 'not_found' })
})

test('an unknown enum value names the accepted values', async () => {
  const { token } = await h.account('growth')
  const res = await h.call('POST', '/v1/api-keys', { token, body: { name: 'x', scope: 'everything' } })
  expect(res.status).toBe(400)
  expect(res.body.errors[0].field).toBe('body.scope')
  expect(res.body.errors[0].message).toContain('must be one of: full_access, validate, keys:read')
})

// Deleting a product reaches the validate fast path's hot state (over a real socket).
import { expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, useHarness } from '../support/harness'

setDefaultTimeout(30_000)

const h = useHarness()

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

import { expect, test } from 'bun:test'
import { useHarness } from '../support/harness'

const h = useHarness({ socket: false })

test('an account can ping, create a product and a key', async () => {
  const { id, token } = await h.account()
  const ping = await h.call('GET', '/v1/ping', { token })
  expect(ping.status).toBe(200)
  expect(ping.body).toEqual({ status: 'ok', accountId: id, accountName: 'Test growth' })
  expect(ping.headers.get('x-request-id')).toMatch(/^req_/)
  const product = await h.call('POST', '/v1/products', { token, body: { name: 'App', slug: 'app' } })
  expect(product.status).toBe(201)
  const key = await h.call('POST', '/v1/keys', { token, body: { product_id: product.body.id } })
  expect(key.status).toBe(201)
  expect(key.body.key_value).toMatch(/^([0-9A-HJKMNP-TV-Z]{5}-){4}[0-9A-HJKMNP-TV-Z]{5}$/)
})

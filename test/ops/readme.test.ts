// The README's first look, run as written against a real node: its validate example shows the real
// answer, every field of it and nothing else; and the bind address it states is the default.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createHash } from 'node:crypto'
import { loadConfig } from '../../src/config'
import { useHarness } from '../support/harness'

const h = useHarness({ socket: false })
const README = readFileSync(join(import.meta.dir, '..', '..', 'README.md'), 'utf8')

test("the README's validate answer is the real one, field for field", async () => {
  const documented = JSON.parse(/^# (\{"valid":true.*\})$/m.exec(README)![1]!)
  const { token } = await h.account()
  // The README's steps: a product, a key with activation_limit 2, a validate from device-1.
  const product = await h.call('POST', '/v1/products', { token, body: { name: 'My App', slug: 'my-app' } })
  const key = await h.call('POST', '/v1/keys', { token, body: { product_id: product.body.id, activation_limit: 2 } })
  const fp = createHash('sha256').update('device-1').digest('hex')
  const res = await h.call('POST', '/v1/validate', { token, body: { key: key.body.key_value, device_fingerprint: fp } })
  expect(res.status).toBe(200)
  expect(Object.keys(documented)).toEqual(Object.keys(res.body))
  expect(documented).toEqual(res.body)
  // Each field is explained in the paragraph under the example.
  for (const field of Object.keys(documented).filter((f) => f !== 'valid')) expect(README).toContain(`\`${field}\``)
})

test('the README says where the server listens, and that is the default', () => {
  expect(README).toContain('The server listens on `127.0.0.1`')
  expect(loadConfig({}).host).toBe('127.0.0.1')
})

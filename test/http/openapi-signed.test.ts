// The signed routes are documented as such (docs/api.md, "Operations"): Keyward-Nonce as a request header, and
// Keyward-Signature on every answer that can be signed (problems included, 401 excepted); no other
// operation mentions either.
import { beforeAll, expect, test } from 'bun:test'
import { useHarness } from '../support/harness'

const h = useHarness({ socket: false })
const SIGNED = ['post /v1/deactivate', 'post /v1/devices', 'post /v1/validate'] // sorted
let doc: any

beforeAll(async () => {
  const res = await h.call('GET', '/docs/json')
  expect(res.status).toBe(200)
  doc = res.body
})

test('Keyward-Nonce and Keyward-Signature on the signed operations only', () => {
  const resolve = (res: any) => (res.$ref ? doc.components.responses[res.$ref.split('/').pop()] : res)
  const seen: string[] = []
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      const key = `${method} ${path}`
      const signed = SIGNED.includes(key)
      if (signed) seen.push(key)
      const params = (op.parameters ?? []).map((p: any) => p.$ref ?? p.name)
      expect([key, params.includes('#/components/parameters/KeywardNonce')]).toEqual([key, signed])
      for (const [status, res] of Object.entries<any>(op.responses)) {
        const headers = Object.keys(resolve(res).headers ?? {})
        expect([key, status, headers.includes('Keyward-Signature')]).toEqual([key, status, signed && status !== '401'])
        expect(headers).toContain('X-Request-Id')
      }
    }
  }
  expect(seen.sort()).toEqual(SIGNED)
  const validate = doc.paths['/v1/validate'].post.responses
  for (const status of ['200', '400', '403', '429', '503']) expect(Object.keys(validate[status].headers)).toContain('Keyward-Signature')
  expect(Object.keys(validate['429'].headers)).toContain('Retry-After')
  expect(validate['400'].content['application/problem+json'].schema.$ref).toBe('#/components/schemas/Problem')
  expect(doc.components.parameters.KeywardNonce).toMatchObject({ name: 'Keyward-Nonce', in: 'header', required: false })
  expect(doc.components.parameters.KeywardNonce.schema.pattern).toBe('^[A-Za-z0-9_-]{16,128}$')
  expect(doc.components.headers.KeywardSignature.description).toContain('keyward-answer/v3')
  expect(doc.components.headers.KeywardSignature.description).toContain('SHA-256 of the exact request body bytes')
})

// Liveness answers 200 whatever its query string (docs/api.md, "Operations"): a probe may append anything.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startHarness, type Harness } from '../support/harness'

let h: Harness
beforeAll(async () => {
  h = await startHarness()
}, 60_000)
afterAll(() => h.close())

const QUERIES = [
  '',
  '?',
  '?x=1',
  '?%00',
  '?a=%00',
  '?a=b%00c&d=e',
  '?a=%zz',
  '?a=%E0',
  '?a[b]=1&a[c]=2',
  '?__proto__=1&constructor=2',
  '?status=down',
  '?' + 'q='.padEnd(8000, 'x'),
  '?a=%F0%9F%98%80&b=%C0%AF',
]

test('GET /healthz and /healthz/ answer 200 {status: ok} whatever the query', async () => {
  for (const path of ['/healthz', '/healthz/']) {
    for (const query of QUERIES) {
      const res = await h.call('GET', path + query)
      expect({ query, status: res.status, body: res.body }).toEqual({ query, status: 200, body: { status: 'ok' } })
    }
  }
})

test('other routes still refuse a NUL in the query', async () => {
  const res = await h.call('GET', '/readyz?a=%00')
  expect(res.status).toBe(400)
  expect(res.body.code).toBe('invalid_request')
})

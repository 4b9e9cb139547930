// X-Request-Id: the kernel echoes a sane caller id and generates one otherwise.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { useHarness } from '../support/harness'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

test('X-Request-Id: a sane caller id is echoed, anything else replaced by a generated one', async () => {
  const echoed = await h.call('GET', '/healthz', { headers: { 'x-request-id': 'trace-42.a:b_c' } })
  expect(echoed.headers.get('x-request-id')).toBe('trace-42.a:b_c')
  for (const bad of ['has space', 'x'.repeat(129), 'ünïcode', '<script>']) {
    const res = await h.call('GET', '/healthz', { headers: { 'x-request-id': bad } })
    expect(res.headers.get('x-request-id')).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/)
  }
  const generated = await h.call('GET', '/healthz')
  expect(generated.headers.get('x-request-id')).toMatch(/^req_/)
})

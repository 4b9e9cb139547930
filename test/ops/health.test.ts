// GET /healthz and /readyz over the app.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { useHarness } from '../support/harness'

setDefaultTimeout(30_000) // two shared cores: a slow start is not a failure

const h = useHarness({ socket: false })

test('GET /healthz and /readyz', async () => {
  const live = await h.call('GET', '/healthz')
  expect(live.status).toBe(200)
  expect(live.body).toEqual({ status: 'ok' })
  const ready = await h.call('GET', '/readyz')
  expect(ready.status).toBe(200)
  expect(Object.keys(ready.body).sort()).toEqual(['nats', 'postgres', 'redis'])
  for (const v of Object.values(ready.body)) expect(['ok', 'embedded']).toContain(v as string)
})

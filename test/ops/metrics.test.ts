// /readyz reports each dependency; /metrics is Prometheus text with per-route latency, validate
// answers, cache lookups, bus and counter state.
import { expect, test } from 'bun:test'
import { useHarness } from '../support/harness'

const h = useHarness()

test('/readyz reports postgres, nats and redis', async () => {
  const res = await h.call('GET', '/readyz')
  expect(res.status).toBe(200)
  const expected = (url: string | undefined) => (url ? 'ok' : 'embedded')
  expect(res.body).toEqual({
    postgres: process.env.DATABASE_URL ? 'ok' : 'embedded',
    nats: expected(process.env.NATS_URL),
    redis: expected(process.env.REDIS_URL),
  })
})

test('/metrics exposes request latency per route pattern and the cluster gauges', async () => {
  const { token } = await h.account()
  await h.call('GET', '/v1/ping', { token })
  await h.call('GET', '/v1/keys/key_01J00000000000000000000000', { token })
  await h.call('GET', '/no/such/route')
  const res = await fetch(`${h.node.url}/metrics`)
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toContain('text/plain')
  const text = await res.text()
  expect(text).toMatch(/keyward_http_request_duration_seconds_bucket\{[^}]*route="\/v1\/ping"[^}]*\}/)
  // the pattern, not the id
  expect(text).toMatch(/route="\/v1\/keys\/:id"/)
  expect(text).not.toContain('key_01J00000000000000000000000')
  for (const name of [
    'keyward_validate_answers_total',
    'keyward_hot_cache_lookups_total',
    'keyward_invalidations_total',
    'keyward_bus_connected',
    'keyward_counter_flush_lag_seconds',
    'process_cpu_seconds_total',
  ]) {
    expect(text).toContain(`# TYPE ${name}`)
  }
})

// Contract test of the one place that writes into prom-client's histogram internals
// (src/infra/route-latency.ts): what it folds in must render exactly as prom-client's own observe
// renders the same observations. A prom-client upgrade that changes the series record fails here.
import { expect, test } from 'bun:test'
import client from 'prom-client'
import { RouteLatencies } from '../../src/infra/route-latency'

const BUCKETS = [0.001, 0.01, 0.1, 1]
const OBSERVATIONS: [number, number][] = [
  [200, 0.0005],
  [200, 0.001], // on a bound: counts in that bucket (le)
  [200, 0.05],
  [200, 3], // above the last bound: only +Inf, sum and count
  [401, 0.002],
  [200, 0.0007],
  [413, 0.2],
]

function pair() {
  const registry = new client.Registry()
  const latencies = new RouteLatencies(BUCKETS)
  const folded = new client.Histogram({
    name: 'folded_seconds',
    help: 'h',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: BUCKETS,
    registers: [registry],
    collect() {
      latencies.foldInto(this)
    },
  })
  const observed = new client.Histogram({
    name: 'observed_seconds',
    help: 'h',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: BUCKETS,
    registers: [registry],
  })
  return { registry, latencies, folded, observed }
}

const render = async (registry: client.Registry, name: string) =>
  (await registry.getSingleMetricAsString(name)).replaceAll(name, 'h').split('\n').sort().join('\n')

test('the fold and observe agree series by series, scrape after scrape', async () => {
  const { registry, latencies, folded, observed } = pair()
  const route = latencies.route('POST', '/v1/validate')
  expect(latencies.route('POST', '/v1/validate')).toBe(route) // one accumulator per route
  // one series exists before the first fold (the framework door observes into the same histogram)
  for (const h of [folded, observed]) h.observe({ method: 'POST', route: '/v1/validate', status: '200' }, 0.004)
  for (let scrape = 0; scrape < 3; scrape++) {
    for (const [status, seconds] of OBSERVATIONS) {
      route.observe(status, seconds * (scrape + 1))
      observed.observe({ method: 'POST', route: '/v1/validate', status: String(status) }, seconds * (scrape + 1))
    }
    const text = await render(registry, 'folded_seconds')
    expect(text).toContain(`h_count{method="POST",route="/v1/validate",status="401"} ${scrape + 1}`)
    expect(text).toBe(await render(registry, 'observed_seconds'))
  }
})

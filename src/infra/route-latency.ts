// Latency of the routes served outside the framework, without prom-client on the request path:
// observe() is a bucket search and three additions into plain arrays; the observations are folded
// into the shared `keyward_http_request_duration_seconds` histogram by its `collect` option (prom-client
// calls it before rendering the metric), so /metrics is exact at every scrape. Wired in infra/metrics.ts.
// Measured: prom-client's observe (label validation, label hashing, a property lookup per bucket) cost
// ≈1 µs per request, so the fold adds bucket counts to prom-client's series record directly. prom-client
// has no public call for that: this is the one file that touches its histogram internals (`hashMap`),
// and test/infra/route-latency.test.ts holds the result against prom-client's own observe.
import type { Histogram } from 'prom-client'

/** prom-client's per-label-set record (lib/histogram.js, 15.x): bucket counts are per bucket, not cumulative. */
interface Series {
  labels: Record<string, string | number>
  bucketValues: Record<number, number>
  sum: number
  count: number
}

const seriesOf = (histogram: Histogram<string>) => (histogram as unknown as { hashMap: Record<string, Series> }).hashMap

class Pending {
  /** One count per upper bound; observations above the last bound only count toward `count` (+Inf). */
  readonly buckets: number[]
  sum = 0
  count = 0
  /** The last observation: it creates the series in prom-client when the route has none yet. */
  last = 0
  constructor(n: number) {
    this.buckets = new Array<number>(n).fill(0)
  }
}

/** One route's pending observations, by status. */
export class RouteLatency {
  readonly pending = new Map<number, Pending>()
  /** 200 is nearly every answer: no Map lookup for it. */
  private readonly ok: Pending

  constructor(
    private readonly bounds: readonly number[],
    readonly method: string,
    readonly route: string,
  ) {
    this.ok = this.at(200)
  }

  private at(status: number): Pending {
    let p = this.pending.get(status)
    if (!p) this.pending.set(status, (p = new Pending(this.bounds.length)))
    return p
  }

  observe(status: number, seconds: number) {
    const p = status === 200 ? this.ok : this.at(status)
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && seconds > bounds[i]) i++
    if (i < bounds.length) p.buckets[i]++
    p.sum += seconds
    p.count++
    p.last = seconds
  }
}

/** The routes observed outside the framework, for one histogram with these bucket bounds. */
export class RouteLatencies {
  private routes = new Map<string, RouteLatency>()

  constructor(private readonly bounds: readonly number[]) {}

  /** The accumulator of one route (one per method and route, shared by every node of the process). */
  route(method: string, route: string): RouteLatency {
    let r = this.routes.get(`${method} ${route}`)
    if (!r) this.routes.set(`${method} ${route}`, (r = new RouteLatency(this.bounds, method, route)))
    return r
  }

  /** Adds what was observed since the last scrape to `histogram`'s series (created on first use). */
  foldInto(histogram: Histogram<string>) {
    const bounds = this.bounds
    for (const r of this.routes.values()) {
      for (const [status, p] of r.pending) {
        if (p.count === 0) continue
        const labels = { method: r.method, route: r.route, status: String(status) }
        let series = findSeries(seriesOf(histogram), labels)
        if (!series) {
          // Created through the public API with one real observation, taken out of the pending ones.
          histogram.observe(labels, p.last)
          series = findSeries(seriesOf(histogram), labels)!
          const i = bounds.findIndex((b) => p.last <= b)
          if (i !== -1) p.buckets[i]--
          p.sum -= p.last
          p.count--
        }
        for (let i = 0; i < bounds.length; i++) {
          series.bucketValues[bounds[i]] += p.buckets[i]
          p.buckets[i] = 0
        }
        series.sum += p.sum
        series.count += p.count
        p.sum = 0
        p.count = 0
      }
    }
  }
}

function findSeries(map: Record<string, Series>, labels: Record<string, string>): Series | undefined {
  for (const key in map) {
    const s = map[key]
    if (s.labels.method === labels.method && s.labels.route === labels.route && String(s.labels.status) === labels.status) return s
  }
  return undefined
}

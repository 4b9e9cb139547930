// The validate fast path's latency histogram without prom-client on the request path: observe() is
// a bucket search and three additions into plain arrays; the observations are folded into the shared
// `keyward_http_request_duration_seconds` histogram when the registry is read (prom-client calls a
// metric's `collect` before rendering it), so /metrics is exact at every scrape. Measured: prom-client's
// observe (label validation, label hashing, a property lookup per bucket) cost ≈1 µs per request.
import type { Histogram } from 'prom-client'

/** prom-client's per-label-set record (lib/histogram.js, 15.x): bucket counts are per bucket, not cumulative. */
interface Series {
  labels: Record<string, string | number>
  bucketValues: Record<number, number>
  sum: number
  count: number
}

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

export class RouteLatency {
  private pending = new Map<number, Pending>()
  private readonly bounds: number[]
  /** 200 is nearly every answer: no Map lookup for it. */
  private readonly ok: Pending

  constructor(
    private histogram: Histogram<string>,
    private method: string,
    private route: string,
  ) {
    this.bounds = (histogram as unknown as { upperBounds: number[] }).upperBounds
    this.ok = this.at(200)
    const h = histogram as unknown as { collect?: () => unknown }
    const previous = h.collect
    h.collect = () => {
      this.fold()
      return previous?.call(histogram)
    }
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

  /** Adds what was observed since the last scrape to prom-client's series (created on first use). */
  fold() {
    const map = (this.histogram as unknown as { hashMap: Record<string, Series> }).hashMap
    for (const [status, p] of this.pending) {
      if (p.count === 0) continue
      const labels = { method: this.method, route: this.route, status: String(status) }
      let series = findSeries(map, labels)
      if (!series) {
        // Created through the public API with one real observation, taken out of the pending ones.
        this.histogram.observe(labels, p.last)
        series = findSeries((this.histogram as unknown as { hashMap: Record<string, Series> }).hashMap, labels)!
        const i = this.bounds.findIndex((b) => p.last <= b)
        if (i !== -1) p.buckets[i]--
        p.sum -= p.last
        p.count--
      }
      for (let i = 0; i < this.bounds.length; i++) {
        series.bucketValues[this.bounds[i]] += p.buckets[i]
        p.buckets[i] = 0
      }
      series.sum += p.sum
      series.count += p.count
      p.sum = 0
      p.count = 0
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

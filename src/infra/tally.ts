// Counting on the hot path without prom-client's per-call label hashing: a plain number per label
// value, folded into the Prometheus counter by the counter's own `collect` option (prom-client calls it
// before rendering the metric), so /metrics is exact at every scrape. Wired in infra/metrics.ts.
import type { Counter } from 'prom-client'

class Pending {
  n = 0
  inc() {
    this.n++
  }
}

export type Tally<V extends string> = Record<V, Pending>

export function tally<V extends string>(values: readonly V[]): Tally<V> {
  const out = {} as Tally<V>
  for (const v of values) out[v] = new Pending()
  return out
}

/** Adds what was counted since the last scrape to `counter`, one label value at a time. */
export function foldTally<V extends string>(counts: Tally<V>, counter: Counter<string>, label: string) {
  for (const v in counts) {
    const n = counts[v].n
    if (n === 0) continue
    counts[v].n = 0
    counter.inc({ [label]: v }, n)
  }
}

/** As foldTally, for counts kept by position: `counts[i]` is the count of `values[i]`. */
export function foldCounts(counts: Float64Array, values: readonly string[], counter: Counter<string>, label: string) {
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i]!
    if (n === 0) continue
    counts[i] = 0
    counter.inc({ [label]: values[i]! }, n)
  }
}

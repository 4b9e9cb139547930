// Counting on the hot path without prom-client's per-call label hashing: a plain number per label
// value, folded into the Prometheus counter when the registry is read (prom-client calls a metric's
// `collect` before rendering it), so /metrics is exact at every scrape.
import type { Counter } from 'prom-client'

class Pending {
  n = 0
  inc() {
    this.n++
  }
}

export type Tally<V extends string> = Record<V, Pending>

export function tally<V extends string>(counter: Counter<string>, label: string, values: readonly V[]): Tally<V> {
  const out = {} as Tally<V>
  for (const v of values) out[v] = new Pending()
  ;(counter as unknown as { collect: () => void }).collect = () => {
    for (const v of values) {
      const n = out[v].n
      if (n === 0) continue
      out[v].n = 0
      counter.inc({ [label]: v }, n)
    }
  }
  return out
}

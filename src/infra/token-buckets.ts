// Per-name token buckets in memory (one node's view): each name may take `ratePerSecond` a second on
// average and `burst` at once. Used where a call costs Postgres work that no other limit bounds
// (the holder routes, per account). Idle buckets are full again and are forgotten, so memory holds
// only the names seen lately.

/** Names held at most before full (idle) buckets are forgotten. */
const PRUNE_AT = 10_000

export class TokenBuckets {
  private buckets = new Map<string, { tokens: number; at: number }>()

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
  ) {}

  /** Takes one token for `name` at `now` (epoch ms): 0 when taken, else how many ms until one is there. */
  take(name: string, now: number): number {
    let b = this.buckets.get(name)
    if (b === undefined) {
      if (this.buckets.size >= PRUNE_AT) this.prune(now)
      b = { tokens: this.burst, at: now }
      this.buckets.set(name, b)
    } else {
      b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.ratePerSecond)
      b.at = now
    }
    if (b.tokens >= 1) {
      b.tokens -= 1
      return 0
    }
    return Math.ceil(((1 - b.tokens) / this.ratePerSecond) * 1000)
  }

  private prune(now: number) {
    for (const [name, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.ratePerSecond >= this.burst) this.buckets.delete(name)
    }
  }
}

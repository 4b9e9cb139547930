// The holder routes' (POST /v1/devices, POST /v1/deactivate) limits per account, on one node. The
// token bucket (HOLDER_RATE_PER_SECOND, HOLDER_RATE_BURST) bounds how many calls an account makes;
// it did not bound what they cost: a flood of /v1/devices inside the rate still held enough of the
// Postgres pool to slow every other account about 4x. So an account's calls also run at most
// HOLDER_CONCURRENCY at a time per node; up to HOLDER_QUEUE more wait their turn (holding no
// connection), and past that the call is 429 like a call over the rate (docs/decisions.md,
// "Validation, deactivation, quota").
import { AppError } from '../../core/errors'
import { TokenBuckets } from '../../infra/token-buckets'

/** An account's holder calls running at once on a node (each holds at most one Postgres connection). */
export const HOLDER_CONCURRENCY = 2
/** An account's holder calls waiting for a turn on a node, past which a call is 429. */
export const HOLDER_QUEUE = 32

const overRate = (retryAfter: number) =>
  new AppError('rate_limited', "This account's calls to /v1/devices and /v1/deactivate are over their rate on this node; retry shortly", {
    retryAfter,
  })

export class HolderGate {
  private calls: TokenBuckets
  private accounts = new Map<string, { running: number; waiting: (() => void)[] }>()

  constructor(
    ratePerSecond: number,
    burst: number,
    private readonly concurrency = HOLDER_CONCURRENCY,
    private readonly queue = HOLDER_QUEUE,
  ) {
    this.calls = new TokenBuckets(ratePerSecond, burst)
  }

  /**
   * Admits one call of `accountId`: a token of its bucket (429 past it), then a turn among its running
   * calls (429 when the queue is full too). Resolves to the release, to call once the call is done.
   */
  async admit(accountId: string, now: number): Promise<() => void> {
    const wait = this.calls.take(accountId, now)
    if (wait > 0) throw overRate(Math.max(1, Math.ceil(wait / 1000)))
    let account = this.accounts.get(accountId)
    if (account === undefined) this.accounts.set(accountId, (account = { running: 0, waiting: [] }))
    if (account.running >= this.concurrency) {
      if (account.waiting.length >= this.queue) throw overRate(1)
      await new Promise<void>((resolve) => account.waiting.push(resolve)) // the slot is handed over by release
    } else account.running++
    let released = false
    return () => {
      if (released) return
      released = true
      const next = account.waiting.shift()
      if (next !== undefined) return next() // the slot passes to the next waiter
      if (--account.running === 0) this.accounts.delete(accountId)
    }
  }
}

// What POST /v1/relays/:id/check-in may cost before its signature is checked (docs/decisions.md,
// "Relays (cloud side): decisions"): the door has no Authorization, so anyone can call it. On each node:
// a token bucket per calling address, taken before any other work; and one per relay id, taken only
// once the signature verified, so that calls forged for a relay's id cannot use up the genuine relay's
// check-ins (it bounds what a relay's own calls write). A relay checks in at most once a second
// (CHECK_IN_SECONDS ≥ 1), so its bucket never stops a well-behaved one.
import { AppError } from '../../core/errors'
import { TokenBuckets } from '../../infra/token-buckets'

/** Calls per second (and at once) from one address, over every relay. */
export const CHECK_IN_ADDRESS_RATE = { perSecond: 50, burst: 200 }
/** Calls per second (and at once) for one relay id, from every address. */
export const CHECK_IN_RELAY_RATE = { perSecond: 2, burst: 10 }

export class CheckInGate {
  private byAddress = new TokenBuckets(CHECK_IN_ADDRESS_RATE.perSecond, CHECK_IN_ADDRESS_RATE.burst)
  private byRelay = new TokenBuckets(CHECK_IN_RELAY_RATE.perSecond, CHECK_IN_RELAY_RATE.burst)

  /** Before any work: 429 past the calling address's rate. */
  admitAddress(address: string | null, now: number): void {
    if (address !== null) limited(this.byAddress.take(address, now))
  }

  /** A check-in whose signature verified: 429 past its relay's rate. */
  admitRelay(relayId: string, now: number): void {
    limited(this.byRelay.take(relayId, now))
  }
}

function limited(waitMs: number): void {
  if (waitMs === 0) return
  throw new AppError('rate_limited', 'Too many check-ins; retry shortly', { retryAfter: Math.max(1, Math.ceil(waitMs / 1000)) })
}

/** One gate per node (per set of dependencies: tests run several nodes in one process). */
const gates = new WeakMap<object, CheckInGate>()
export function checkInGateOf(deps: object): CheckInGate {
  let gate = gates.get(deps)
  if (gate === undefined) gates.set(deps, (gate = new CheckInGate()))
  return gate
}

// What POST /v1/relays/:id/check-in may cost before its signature is checked (docs/decisions.md,
// "Relays (cloud side): decisions"): the door has no Authorization, so anyone can call it. On each node,
// before Postgres: a token bucket per calling address and one per relay id (ids not shaped like one
// share a bucket, so made-up strings cost no memory). A relay checks in at most once a second
// (CHECK_IN_SECONDS ≥ 1), so its own bucket never stops a genuine one.
import { AppError } from '../../core/errors'
import { TokenBuckets } from '../../infra/token-buckets'

/** Calls per second (and at once) from one address, over every relay. */
export const CHECK_IN_ADDRESS_RATE = { perSecond: 10, burst: 50 }
/** Calls per second (and at once) for one relay id, from every address. */
export const CHECK_IN_RELAY_RATE = { perSecond: 2, burst: 10 }

export class CheckInGate {
  private byAddress = new TokenBuckets(CHECK_IN_ADDRESS_RATE.perSecond, CHECK_IN_ADDRESS_RATE.burst)
  private byRelay = new TokenBuckets(CHECK_IN_RELAY_RATE.perSecond, CHECK_IN_RELAY_RATE.burst)

  /** 429 past the address's or the relay id's rate; nothing else is spent on the call then. */
  admit(relayId: string, wellFormed: boolean, address: string | null, now: number): void {
    const wait = Math.max(address === null ? 0 : this.byAddress.take(address, now), this.byRelay.take(wellFormed ? relayId : '', now))
    if (wait === 0) return
    throw new AppError('rate_limited', 'Too many check-ins; retry shortly', { retryAfter: Math.max(1, Math.ceil(wait / 1000)) })
  }
}

/** One gate per node (per set of dependencies: tests run several nodes in one process). */
const gates = new WeakMap<object, CheckInGate>()
export function checkInGateOf(deps: object): CheckInGate {
  let gate = gates.get(deps)
  if (gate === undefined) gates.set(deps, (gate = new CheckInGate()))
  return gate
}

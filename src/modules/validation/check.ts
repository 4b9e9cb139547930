// One validate call's facts, read once at the door and carried through the engine's decision
// (service.ts) as one record, the way Unkey's key verifier carries its session: who asks, what was
// sent, the country header, the clock reading the call is decided and counted at, and, as the
// decision learns them, the key's hot-state key and the product the answer is counted under.
//
// The engine fills one Check per call that answers from memory, and reuses it for the next: the
// common call allocates nothing for its facts. A decision that waits (a load, a lease, a seat claim)
// takes its own copy first (`held`), because once it has returned a promise the engine's Check
// belongs to the next call.
import type { Principal } from '../../core/principal'
import { NO_PRODUCT } from '../analytics/validation-counts'
import type { ValidateBody } from './model'

/** The country a door read from the request's country header (COUNTRY_HEADER), when it is two letters (upper-cased); anything else is not recorded. */
export function countryOf(value: string | null): string | null {
  return value !== null && /^[A-Za-z]{2}$/.test(value) ? value.toUpperCase() : null
}

export class Check {
  /** The caller's account: the keys it may see, the answers' counts. */
  account = ''
  body: ValidateBody = null as never
  /** The raw value of the request's country header (null when absent): only a new device's activation stores it (countryOf). */
  country: string | null = null
  /** Epoch ms the call is decided at (expiry, last-seen) and counted on. */
  now = 0
  /** The key's place in the hot state, once the value is hashed (an imported key's own, once found). */
  hotKey = ''
  /** The product the answer is counted under: the key's once it is known to be the caller's, else NO_PRODUCT. */
  product = NO_PRODUCT
  /** The device's fingerprint, lower-cased, once the key is decided to be valid so far. */
  fingerprint = ''

  /** This call's facts in place of the last call's. */
  start(who: Principal, body: ValidateBody, country: string | null, now: number): this {
    this.account = who.accountId
    this.body = body
    this.country = country
    this.now = now
    this.hotKey = ''
    this.product = NO_PRODUCT
    this.fingerprint = ''
    return this
  }

  /** A copy of its own, for a decision that waits (the engine's Check is the next call's meanwhile). */
  held(): Check {
    const c = new Check()
    c.account = this.account
    c.body = this.body
    c.country = this.country
    c.now = this.now
    c.hotKey = this.hotKey
    c.product = this.product
    c.fingerprint = this.fingerprint
    return c
  }

  /** The clock reading after a wait. */
  at(now: number): this {
    this.now = now
    return this
  }
}

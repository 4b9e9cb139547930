// What a provider event means for keys, in Keyward's words: each provider's reader (providers/*.ts)
// turns its payload into one Intent, read from the payload alone; apply.ts carries it out. The same
// meaning for every provider (the lifecycle table of docs/payments.md).
import { EMAIL, EMAIL_MAX, TEXT_MAX } from '../../core/customer'
import { findUnstorable } from '../../http/kernel'

/** A priced line: the provider's price (or variant) id and how many were bought. */
export interface Line {
  price: string
  quantity: number
}

/**
 * `email`: the buyer's address, only when it is one valid address (buyerEmail); else null, and
 * `emailProblem` says why there is no mail (the key is issued all the same). `name`: the buyer's
 * name when the payload has one (buyerName); `ids.customer`: the provider's customer id. The three
 * become the new key's `customer` (apply.ts).
 * `refs`: the provider objects this event is about (subscription, order, payment, invoice, checkout
 * session ids, prefixed by kind): a new key is linked to all of them, and later events find their
 * keys by any of them. The first ref is the one the event's keys are created under (at most once).
 */
export type Intent =
  /** One-time purchase paid: a key per mapped line. */
  | { kind: 'purchase'; refs: string[]; lines: Line[]; email: string | null; emailProblem?: string; name?: string | null; ids: Record<string, string> }
  /** Subscription started or renewed: its key created (when `create`), or its expiry moved to the period's end. */
  | {
      kind: 'subscription'
      refs: string[]
      lines: Line[]
      email: string | null
      emailProblem?: string
      name?: string | null
      ids: Record<string, string>
      periodEnd: Date | null
      create: boolean
    }
  | { kind: 'suspend'; refs: string[]; reason: 'subscription_paused' | 'disputed' }
  /** Ends a suspension of this reason (a dispute won, a subscription resumed). */
  | { kind: 'reinstate'; refs: string[]; reason: 'subscription_paused' | 'disputed' }
  /** Cancelled: the key expires at `at` (the end of the paid period, or now). */
  | { kind: 'end'; refs: string[]; at: Date }
  | { kind: 'revoke'; refs: string[]; reason: 'refunded' }
  /** Links more provider objects to the keys of `refs` (e.g. an invoice's payment). */
  | { kind: 'link'; refs: string[]; more: string[] }
  /** Nothing to do: the detail says why (a failed payment, an event type Keyward does not act on). */
  | { kind: 'none'; detail: string }

/** A verified provider event: its id (the inbox key), its type and what it means. */
export interface ReadEvent {
  id: string
  type: string
  intent: Intent
}

/** The payload's signature does not verify, or it is stale: 400, nothing processed. */
export class BadSignature extends Error {}
/** The payload verified but is not what the provider documents: 400, nothing processed. */
export class Malformed extends Error {}

/**
 * How far in the future a signature's timestamp may be (our clock behind the provider's). The
 * libraries only refuse old timestamps; a signature dated later than this is refused too, so a captured
 * future-dated request cannot be held back and replayed once its time comes (docs/payments.md).
 */
export const FUTURE_SKEW_SECONDS = 30

/** Refuses a signature timestamp (Unix seconds) further ahead of this node's clock than FUTURE_SKEW_SECONDS. */
export function notFromTheFuture(timestamp: number, now = Date.now()) {
  const ahead = timestamp - Math.floor(now / 1000)
  if (ahead > FUTURE_SKEW_SECONDS) throw new BadSignature(`the signature is dated ${ahead} s in the future (more than ${FUTURE_SKEW_SECONDS} s ahead of this server)`)
}

/**
 * A verified payload holds only text Postgres can store (no NUL, no lone UTF-16 surrogate: kernel.ts
 * `unstorable`, the rule of every JSON body); else it is malformed, not a 500 where its ids are written.
 */
export function storable<T>(payload: T): T {
  const bad = findUnstorable(payload, 'body')
  if (bad !== null) throw new Malformed(`${bad} holds a NUL character or a lone UTF-16 surrogate`)
  return payload
}

/** Unix seconds (Stripe) → Date. */
export const fromUnix = (s: unknown): Date | null => (typeof s === 'number' && Number.isFinite(s) ? new Date(s * 1000) : null)
/** An RFC 3339 instant (Paddle, Lemon Squeezy) → Date. */
export function fromIso(s: unknown): Date | null {
  if (typeof s !== 'string') return null
  const d = new Date(s)
  return Number.isNaN(d.getTime()) ? null : d
}

export function str(v: unknown, what: string): string {
  if (typeof v === 'string' && v.length > 0) return v
  if (typeof v === 'number' && Number.isFinite(v)) return String(v)
  throw new Malformed(`${what} is missing`)
}

export const optStr = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : typeof v === 'number' ? String(v) : null)

export function obj(v: unknown, what: string): Record<string, any> {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, any>
  throw new Malformed(`${what} is missing`)
}

export const quantity = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : 1)

/** The buyer's address from a payload value: `email` only when it is one valid address (core/customer.ts EMAIL). */
export function buyerEmail(v: unknown): { email: string | null; emailProblem?: string } {
  const given = optStr(v)
  if (given === null) return { email: null }
  if (given.length <= EMAIL_MAX && EMAIL.test(given)) return { email: given }
  return { email: null, emailProblem: 'no mail: the buyer email in the payload is not one valid address' }
}

/** The buyer's name from a payload value: trimmed, control characters dropped, cut to TEXT_MAX; null when none is left. */
export function buyerName(v: unknown): string | null {
  const given = optStr(v)
  if (given === null) return null
  const clean = [...given.replace(/[\u0000-\u001F\u007F-\u009F]/g, ' ').trim()].slice(0, TEXT_MAX).join('').trim()
  return clean === '' ? null : clean
}

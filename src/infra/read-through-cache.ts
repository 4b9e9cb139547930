// One read-through cache in front of Postgres, with one set of rules for freshness and outages. The
// caches that answer from memory on the request path (the caller's principal, the key hot state)
// extend it and keep only their storage: how entries are held, bounded and evicted.
//
// - Freshness: an entry answers for `ttlMs`; while memory cannot be trusted (invalidations may have
//   been missed, e.g. the bus is down) only for `degradedTtlMs`. That decision is made in one place
//   (`maxAge`), from one input (`trusted`).
// - Refresh ahead: a hit past 75% of its age limit starts a background re-read, so hot entries never wait.
// - Collapsed loads: concurrent loads of one key share one read.
// - Cancel on invalidate: a load overtaken by an invalidation of its key (or by a wholesale drop, which
//   moves the epoch) answers its caller but is not stored: it may have read the row before the change.
//   A caller arriving after the invalidation starts a new read.
// - Stale while unreachable: a re-read of a held entry that takes more than STALE_WAIT_MS (a network
//   that swallows packets, a proxy that accepts and drops) answers with the last known value and the
//   read goes on; a connection error answers with it at once, and for RETRY_UNREACHABLE_MS after one,
//   expired entries answer without queueing behind another attempt. Nothing held: the error propagates.
// - A held entry answers synchronously (no promise): these lookups run on every validate call.
//
// The freshness rule is one small final class (`Freshness`): each subclass's `get` checks its own
// entry with it first and answers a fresh hit itself, so that path runs no virtual lookup and every
// call site sees one shape; anything else (refresh due, stale, absent, miss) takes `get` below.
import { isConnectionError } from './db'

/** How long a re-read of a held entry may take before the last known value answers instead. */
const STALE_WAIT_MS = 1_000
/** After a connection error, how long memory answers alone before Postgres is tried again. */
const RETRY_UNREACHABLE_MS = 1_000
/** Re-read an entry in the background once it is this far into its age limit. */
const REFRESH_AHEAD = 0.75
const STALE = Symbol('stale')

interface Counter {
  inc(): void
}

/** Lookup outcomes, for metrics (hit, negative hit, miss: nothing held, stale: held but too old). */
export interface CacheLookups {
  hit: Counter
  negativeHit: Counter
  miss: Counter
  stale: Counter
}

const uncounted: Counter = { inc() {} }
const UNCOUNTED: CacheLookups = { hit: uncounted, negativeHit: uncounted, miss: uncounted, stale: uncounted }
const alwaysTrusted = () => true

export interface CacheRules {
  ttlMs: number
  degradedTtlMs: number
  /**
   * Whether memory can be trusted at `now` (the bus's word: `Bus.trusted`, which a node that lost the
   * bus or missed a change turns false on its own clock); when false, entries answer only for `degradedTtlMs`.
   */
  trusted?: (now: number) => boolean
  /** Tells "Postgres unreachable" (answer from memory) from other failures (propagate). */
  unreachable?: (err: unknown) => boolean
  lookups?: CacheLookups
}

interface Flight<V> {
  promise: Promise<V | null>
  cancelled: boolean
  epoch: number
}

/** What `Freshness.check` says of an entry. */
export const FRESH = 0
/** Fresh, and far enough into its age limit that a background re-read is due. */
const REFRESH_DUE = 1
/** Too old to answer (unless Postgres is unreachable). */
const EXPIRED = 2

/** The only place that decides how long memory may answer: `ttlMs`, or `degradedTtlMs` while not `trusted`. */
export class Freshness {
  constructor(
    private readonly ttlMs: number,
    private readonly degradedTtlMs: number,
    private readonly trusted: (now: number) => boolean,
  ) {}

  /** FRESH, REFRESH_DUE or EXPIRED for an entry loaded at `loadedAt`. */
  check(loadedAt: number, now: number): number {
    const age = now - loadedAt
    const maxAge = this.trusted(now) ? this.ttlMs : this.degradedTtlMs
    return age < maxAge * REFRESH_AHEAD ? FRESH : age < maxAge ? REFRESH_DUE : EXPIRED
  }
}

/** `V`: a held value, stamped with the time its read started. null: the key is known not to exist. */
export abstract class ReadThroughCache<V extends { loadedAt: number }> {
  private inflight = new Map<string, Flight<V>>()
  private epoch = 0
  /** Until then, a connection error was just seen: expired entries answer without another attempt. */
  private unreachableUntil = 0
  /** Subclasses check a fresh hit with it before calling `get` (see the header). */
  protected readonly freshness: Freshness
  private readonly unreachable: (err: unknown) => boolean
  private readonly lookups: CacheLookups

  constructor(rules: CacheRules) {
    this.freshness = new Freshness(rules.ttlMs, Math.min(rules.degradedTtlMs, rules.ttlMs), rules.trusted ?? alwaysTrusted)
    this.unreachable = rules.unreachable ?? isConnectionError
    this.lookups = rules.lookups ?? UNCOUNTED
  }

  /** Reads `key` from the system of record; null when it does not exist there. */
  protected abstract read(key: string, startedAt: number): Promise<V | null>
  /** The held value for `key` (a lookup: eviction may count it as a use). */
  protected abstract lookup(key: string): V | undefined
  /** When `key` was last read as absent, if that is still held (a negative entry). */
  protected abstract absentSince(key: string): number | undefined
  /** Holds what a read returned (null: absent, stamped `loadedAt`). */
  protected abstract keep(key: string, value: V | null, loadedAt: number): void
  /** Drops what is held for `key`, value or negative entry. */
  protected abstract drop(key: string): void
  /** Drops everything held. */
  protected abstract dropAll(): void

  /**
   * The value for `key`: from memory when fresh (synchronously), else read through. null means no such
   * key. Throws (a connection error) only when Postgres is unreachable and nothing is held for `key`.
   */
  get(key: string, now = Date.now()): V | null | Promise<V | null> {
    const value = this.lookup(key)
    let loadedAt: number
    if (value !== undefined) loadedAt = value.loadedAt
    else {
      const since = this.absentSince(key)
      if (since === undefined) {
        this.lookups.miss.inc() // tried even right after a failure: Postgres may be back, and only it can answer
        return this.load(key)
      }
      loadedAt = since
    }
    const freshness = this.freshness.check(loadedAt, now)
    if (freshness !== EXPIRED) {
      if (freshness === REFRESH_DUE && !this.inflight.has(key)) this.start(key).promise.catch(() => {})
      if (value === undefined) {
        this.lookups.negativeHit.inc()
        return null
      }
      this.lookups.hit.inc()
      return value
    }
    this.lookups.stale.inc()
    // Postgres failed us a moment ago: answer from memory without queueing behind another attempt.
    if (now < this.unreachableUntil) return value ?? null
    return this.load(key)
  }

  private async load(key: string): Promise<V | null> {
    const flight = this.inflight.get(key) ?? this.start(key)
    const old = this.lookup(key)
    const held = old !== undefined || this.absentSince(key) !== undefined
    try {
      if (!held) return await flight.promise
      let timer: Timer | undefined
      const waited = new Promise<typeof STALE>((resolve) => (timer = setTimeout(resolve, STALE_WAIT_MS, STALE)))
      const result = await Promise.race([flight.promise, waited]).finally(() => clearTimeout(timer))
      return result === STALE ? (old ?? null) : result
    } catch (err) {
      // Postgres unreachable: the last thing we knew is the best answer there is (known keys and
      // callers keep working during an outage). Nothing known: the caller answers 503.
      if (!this.unreachable(err)) throw err
      this.unreachableUntil = Date.now() + RETRY_UNREACHABLE_MS
      if (held) return old ?? null
      throw err
    }
  }

  private start(key: string): Flight<V> {
    const startedAt = Date.now()
    const flight: Flight<V> = { promise: Promise.resolve(null), cancelled: false, epoch: this.epoch }
    flight.promise = this.read(key, startedAt).then(
      (value) => {
        this.unreachableUntil = 0
        if (this.inflight.get(key) === flight) this.inflight.delete(key)
        if (!flight.cancelled && flight.epoch === this.epoch) this.keep(key, value, startedAt)
        return value
      },
      (err) => {
        if (this.inflight.get(key) === flight) this.inflight.delete(key)
        throw err
      },
    )
    this.inflight.set(key, flight)
    return flight
  }

  /** Drops what is held for `key`, including a read in flight (it answers its callers, is not kept). */
  invalidate(key: string) {
    this.drop(key)
    const flight = this.inflight.get(key)
    if (flight) {
      flight.cancelled = true
      this.inflight.delete(key)
    }
  }

  /** Keeps no read now in flight (e.g. they may carry an account's old plan); held entries stay. */
  protected cancelReads() {
    this.epoch++
    this.inflight.clear()
  }

  /** Forgets everything (a bus resync: invalidations may have been missed). */
  clear() {
    this.cancelReads()
    this.dropAll()
  }
}

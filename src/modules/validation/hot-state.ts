// The node's hot key state: SHA-256 of a key value → what validate needs to decide (status, expiry,
// plan, limit, active devices). A known key and device is answered from here with no I/O.
//
// - Compact, so a million keys fit in well under 512 MB: entries are keyed by the digest in base64
//   (44 characters; the bus and Postgres speak hex, converted at those edges, never per request), a
//   single device is held as its string rather than a one-element array, and repeated strings
//   (account, product, plan) are interned.
// - Bounded: at most `maxKeys` entries, evicted in approximate LRU order (CLOCK: a hit sets a bit,
//   eviction gives a set bit one more round), so a hit costs one property write, not a Map re-insert.
// - Negative entries (a plain number: the time it was loaded) remember unknown hashes, so guessing
//   costs a guesser one query per value per TTL, not one per request.
// - Freshness: an entry is trusted for `ttlMs` (the contract's 60 s backstop); while the bus is down
//   (invalidations may be missed) only for `degradedTtlMs`. Past that it is re-read, and while
//   Postgres is unreachable the old entry keeps answering: known keys keep validating in an outage.
// - Concurrent loads of one hash share one query. A load overtaken by an invalidation of its hash
//   (or by a resync) answers its caller but is not stored: it may have read the row before the change.
// - Outage: for a second after a connection error, stale entries answer at once instead of queueing
//   behind reconnect attempts; then one read tries Postgres again.
import type { Bus, BusState } from '../../infra/bus'
import { isConnectionError } from '../../infra/db'
import { cacheLookups } from '../../infra/metrics'
import { tally } from './tally'

export type KeyStatus = 'active' | 'revoked' | 'expired'

/** What Postgres says about one key (see repo.loadKeyState). */
export interface KeyRow {
  accountId: string
  productId: string
  status: KeyStatus
  plan: string | null
  /** epoch ms, null = perpetual */
  expiresAt: number | null
  limit: number
  /** fingerprints (lower-case hex) of the active activations */
  devices: string[]
}

export interface KeyState extends Omit<KeyRow, 'devices'> {
  /** Active fingerprints: one device as the string itself (the common case), else an array. */
  devices: string | readonly string[]
  loadedAt: number
  /** CLOCK bit: set on a hit, cleared when eviction passes over the entry */
  used: boolean
}

/** A known key, or a number: a negative entry loaded at that time. */
type Slot = KeyState | number

interface Flight {
  promise: Promise<KeyState | null>
  cancelled: boolean
  epoch: number
}

export interface HotStateOptions {
  ttlMs: number
  degradedTtlMs: number
  maxKeys: number
  busState?: () => BusState
  /** Whether memory may be trusted at `now` (Bus.trusted); when given, it decides instead of busState. */
  trusted?: (now: number) => boolean
}

const lookups = tally(cacheLookups, 'result', ['hit', 'negative_hit', 'miss', 'stale'])
const { hit, negative_hit: negativeHit, miss, stale } = lookups

/** Re-read a hot entry in the background once it is this far into its TTL, so hot keys never wait. */
const REFRESH_AHEAD = 0.75
const MAX_INTERNED = 100_000
const NO_DEVICES: readonly string[] = Object.freeze([])

/** The hot-state key for a key_hash (hex, as stored and sent on the bus): the same digest in base64. */
export const hotKeyOf = (keyHash: string) => Buffer.from(keyHash, 'hex').toString('base64')
/** The key_hash (hex) for a hot-state key. */
export const keyHashOf = (hotKey: string) => Buffer.from(hotKey, 'base64').toString('hex')

export function hasDevice(state: KeyState, fingerprint: string): boolean {
  const d = state.devices
  return typeof d === 'string' ? d === fingerprint : d.includes(fingerprint)
}

export function deviceCount(state: KeyState): number {
  const d = state.devices
  return typeof d === 'string' ? 1 : d.length
}
/** How long a re-read of a known key may take before the last known state answers instead. */
const STALE_WAIT_MS = 1_000
const STALE = Symbol('stale')
/** After a connection error, how long memory answers alone before Postgres is tried again. */
const RETRY_UNREACHABLE_MS = 1_000

export class HotState {
  private slots = new Map<string, Slot>()
  private inflight = new Map<string, Flight>()
  /** Account ids, product ids and plans repeat across keys: keep one copy of each string. */
  private interned = new Map<string, string>()
  private epoch = 0
  /** Until then, a connection error was just seen: stale entries answer without another attempt. */
  private unreachableUntil = 0
  private unsubscribe: () => void = () => {}

  constructor(
    private loader: (hotKey: string) => Promise<KeyRow | null>,
    private opts: HotStateOptions,
    bus?: Bus,
  ) {
    if (bus) {
      this.unsubscribe = bus.subscribe((msg) => {
        if (msg.kind === 'key') this.invalidate(hotKeyOf(msg.keyHash))
        else if (msg.kind === 'device') this.addDevice(hotKeyOf(msg.keyHash), msg.fingerprint)
        else if (msg.kind === 'resync') this.clear()
        // 'account': nothing here depends on the account's plan (the quota reads the principal's plan).
      })
    }
  }

  get size() {
    return this.slots.size
  }

  private maxAge(now: number): number {
    const down = this.opts.trusted ? !this.opts.trusted(now) : this.opts.busState?.() === 'down'
    return down ? Math.min(this.opts.degradedTtlMs, this.opts.ttlMs) : this.opts.ttlMs
  }

  /**
   * The state for `hotKey` (see hotKeyOf): from memory when fresh (synchronously, no promise), else loaded. null
   * means no such key. Throws (a connection error) only when Postgres is unreachable and memory has
   * nothing for this hash.
   */
  get(hotKey: string, now = Date.now()): KeyState | null | Promise<KeyState | null> {
    const slot = this.slots.get(hotKey)
    if (slot !== undefined) {
      const loadedAt = typeof slot === 'number' ? slot : slot.loadedAt
      const age = now - loadedAt
      const maxAge = this.maxAge(now)
      if (age < maxAge) {
        if (age >= maxAge * REFRESH_AHEAD && !this.inflight.has(hotKey)) this.start(hotKey).promise.catch(() => {})
        if (typeof slot === 'number') {
          negativeHit.inc()
          return null
        }
        slot.used = true
        hit.inc()
        return slot
      }
      stale.inc()
      // Postgres failed us a moment ago: answer from memory without queueing behind another attempt.
      if (now < this.unreachableUntil) return typeof slot === 'number' ? null : slot
    } else {
      miss.inc() // tried even right after a failure: Postgres may be back, and only it can answer
    }
    return this.load(hotKey)
  }

  private async load(hotKey: string): Promise<KeyState | null> {
    const flight = this.inflight.get(hotKey) ?? this.start(hotKey)
    const old = this.slots.get(hotKey)
    const lastKnown = () => (typeof old === 'number' ? null : old!)
    try {
      if (old === undefined) return await flight.promise
      // A re-read that hangs (a network that swallows packets, a proxy that accepts and drops) must
      // not hang known keys: past STALE_WAIT_MS the last known state answers and the read goes on.
      let timer: Timer | undefined
      const waited = new Promise<typeof STALE>((resolve) => (timer = setTimeout(resolve, STALE_WAIT_MS, STALE)))
      const result = await Promise.race([flight.promise, waited]).finally(() => clearTimeout(timer))
      return result === STALE ? lastKnown() : result
    } catch (err) {
      // Postgres unreachable: the last thing we knew is the best answer there is (the contract keeps
      // known keys validating during an outage). Nothing known: the caller answers 503.
      if (!isConnectionError(err)) throw err
      this.unreachableUntil = Date.now() + RETRY_UNREACHABLE_MS
      if (old !== undefined) return lastKnown()
      throw err
    }
  }

  private start(hotKey: string): Flight {
    const startedAt = Date.now()
    const flight: Flight = { promise: null as never, cancelled: false, epoch: this.epoch }
    flight.promise = this.loader(hotKey).then(
      (row) => {
        this.unreachableUntil = 0
        if (this.inflight.get(hotKey) === flight) this.inflight.delete(hotKey)
        const state = row ? this.toState(row, startedAt) : null
        if (!flight.cancelled && flight.epoch === this.epoch) this.store(hotKey, state ?? startedAt)
        return state
      },
      (err) => {
        if (this.inflight.get(hotKey) === flight) this.inflight.delete(hotKey)
        throw err
      },
    )
    this.inflight.set(hotKey, flight)
    return flight
  }

  private intern(s: string): string {
    const known = this.interned.get(s)
    if (known !== undefined) return known
    if (this.interned.size < MAX_INTERNED) this.interned.set(s, s)
    return s
  }

  private toState(row: KeyRow, loadedAt: number): KeyState {
    return {
      accountId: this.intern(row.accountId),
      productId: this.intern(row.productId),
      status: row.status,
      plan: row.plan === null ? null : this.intern(row.plan),
      expiresAt: row.expiresAt,
      limit: row.limit,
      devices: row.devices.length === 1 ? row.devices[0] : row.devices.length === 0 ? NO_DEVICES : row.devices,
      loadedAt,
      used: false,
    }
  }

  /** Puts an entry (newest position) and evicts past the bound. Also used by benchmarks to fill memory. */
  store(hotKey: string, slot: Slot) {
    this.slots.delete(hotKey)
    this.slots.set(hotKey, slot)
    if (this.slots.size > this.opts.maxKeys) this.evict()
  }

  /** Fills the state from a row already read (bulk warm-up, benchmarks). */
  put(hotKey: string, row: KeyRow, loadedAt = Date.now()) {
    this.store(hotKey, this.toState(row, loadedAt))
  }

  private evict() {
    while (this.slots.size > this.opts.maxKeys) {
      for (const [hash, slot] of this.slots) {
        this.slots.delete(hash)
        if (typeof slot !== 'number' && slot.used) {
          slot.used = false
          this.slots.set(hash, slot) // second chance: to the back of the queue
          continue
        }
        break
      }
    }
  }

  /** Drops what is known about `hotKey` (positive or negative), including a load in flight. */
  invalidate(hotKey: string) {
    this.slots.delete(hotKey)
    const flight = this.inflight.get(hotKey)
    if (flight) {
      flight.cancelled = true
      this.inflight.delete(hotKey)
    }
  }

  /** A device took a slot (here or on another node): add it without reading the key back. */
  addDevice(hotKey: string, fingerprint: string) {
    const slot = this.slots.get(hotKey)
    if (slot === undefined || typeof slot === 'number' || hasDevice(slot, fingerprint)) return
    const d = slot.devices
    slot.devices = typeof d === 'string' ? [d, fingerprint] : d.length === 0 ? fingerprint : [...d, fingerprint]
  }

  /** Forgets everything (bus resync: invalidations may have been missed). */
  clear() {
    this.epoch++
    this.slots.clear()
    for (const flight of this.inflight.values()) flight.cancelled = true
    this.inflight.clear()
  }

  close() {
    this.unsubscribe()
    this.clear()
  }
}

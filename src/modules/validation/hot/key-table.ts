// The hot state's known keys, packed: one entry per key in typed arrays instead of one object (and a
// dozen strings) per key, so a node holds a million keys in about 140 bytes of RSS each (docs/performance.md,
// "Memory"). An entry is an integer; hot-state.ts turns entries into objects only for keys in use.
//
// - The digest (32 bytes, as 8 words) is the key: an open-addressing index (linear probing, a slot
//   holds entry + 1) finds an entry by a seeded mix of its first two words, and a hit compares all 32
//   bytes, never a prefix. Deletion shifts the probe run back (no tombstones).
// - Fields: status and booleans in one byte; expiry, load time and grace as doubles (NaN: no
//   expiry); the limit as an int; account, product, plan and policy as ids into a counted string table.
// - Devices: the first one as 32 bytes inline, more (rare) out of line as bytes (key-devices.ts).
//   Also out of line (a Map by entry), only for the keys that have them: entitlements that are not
//   empty, a policy key's own terms, relay seats.
// - The field arrays grow by doubling as entries are handed out, up to `capacity` (the index doubles
//   too, at half load). Reserving them for `capacity` at once cost nothing in RSS (pages not yet
//   touched), but JavaScriptCore counts a typed array's whole size toward its heap (≈120 MB for the
//   default million keys), and with that heap the validate p99 was ≈1.3x worse at the same load
//   (docs/performance.md, "Validate"). A doubling copies the columns once; with the index doubling at
//   the same count, filling a table stalls the event loop ≈60 ms as it passes 524,288 keys, and about
//   half that at each doubling before (measured filling 1,000,000 entries in a loop).
// - CLOCK eviction over entries: a hit sets USED, the hand clears it and evicts an entry without it.
// - A generation per entry, bumped whenever the entry is freed or changed, tells holders of an object
//   made from it (hot-state.ts) that it is out of date.
import { randomBytes } from 'node:crypto'
import type { Entitlements } from '../../../core/entitlements'
import { StringIds } from './string-ids'
import { NO_ENTITLEMENTS, type KeyRow, type KeyStatus, type OwnTerms } from './key-row'
import { resized } from './typed-arrays'
import { EntryDevices } from './key-devices'
import { digestWords } from './packed-digests'

const STATUSES: readonly KeyStatus[] = ['active', 'revoked', 'suspended', 'expired']
const STATUS_BITS = 3
const LIVE = 1 << 2
const KEEP = 1 << 3
const ONE_KEY_PER_DEVICE = 1 << 4
const METERED = 1 << 5
const USED = 1 << 6
const OUT_TERMS = 1 << 7
const NONE = -1
/** Entries the columns have room for at first (they double from there). */
const FIRST_ROOM = 1024

/** What a key holds besides its fields and devices, when it is not the usual nothing. */
interface Terms {
  entitlements: Entitlements
  own: OwnTerms | null
  relaySeats: number
}

/** One entry's fields as a row (hot-state.ts makes its object from it). */
export type PackedRow = Omit<KeyRow, 'devices'> & { devices: string | readonly string[] }

export class KeyTable {
  /** Entries' generations: bumped when an entry is freed or changed (read through the table: the array grows). */
  gen: Uint32Array
  /** When each entry's read started (epoch ms; read through the table: the array grows). */
  loadedAt: Float64Array
  private digest: Int32Array
  private flags: Uint8Array
  private expiresAt: Float64Array
  private graceMs: Float64Array
  private limit: Int32Array
  private account: Int32Array
  private product: Int32Array
  private plan: Int32Array
  private policy: Int32Array
  private freeList: Int32Array
  /** Entries the columns have room for (doubles up to `capacity`). */
  private room: number
  private index = new Int32Array(1024)
  private readonly devices: EntryDevices
  private terms = new Map<number, Terms>()
  private strings = new StringIds()
  private readonly words = new Int32Array(8)
  private readonly seed = randomBytes(4).readInt32LE()
  private count = 0
  /** Entries below `top` have been handed out at least once; the free list holds those freed since. */
  private top = 0
  private freed = 0
  private hand = 0

  constructor(readonly capacity: number) {
    const room = (this.room = Math.min(capacity, FIRST_ROOM))
    this.gen = new Uint32Array(room)
    this.loadedAt = new Float64Array(room)
    this.digest = new Int32Array(room * 8)
    this.flags = new Uint8Array(room)
    this.expiresAt = new Float64Array(room)
    this.graceMs = new Float64Array(room)
    this.limit = new Int32Array(room)
    this.account = new Int32Array(room)
    this.product = new Int32Array(room)
    this.plan = new Int32Array(room)
    this.policy = new Int32Array(room)
    this.devices = new EntryDevices(room)
    this.freeList = new Int32Array(room)
  }

  /** Doubles the columns' room (up to `capacity`), copying what they hold. */
  private widen() {
    const room = (this.room = Math.min(this.capacity, this.room * 2))
    this.gen = resized(this.gen, room)
    this.loadedAt = resized(this.loadedAt, room)
    this.digest = resized(this.digest, room * 8)
    this.flags = resized(this.flags, room)
    this.expiresAt = resized(this.expiresAt, room)
    this.graceMs = resized(this.graceMs, room)
    this.limit = resized(this.limit, room)
    this.account = resized(this.account, room)
    this.product = resized(this.product, room)
    this.plan = resized(this.plan, room)
    this.policy = resized(this.policy, room)
    this.devices.resize(room)
    this.freeList = resized(this.freeList, room)
  }

  get size() {
    return this.count
  }

  /** The index slot a digest's probe run starts at. */
  private home(w0: number, w1: number): number {
    const h = Math.imul(w0 ^ this.seed, 0x9e3779b1) ^ Math.imul(w1 + this.seed, 0x85ebca77)
    return (h ^ (h >>> 15)) & (this.index.length - 1)
  }

  /** The entry holding `key`, or -1. */
  find(key: string): number {
    const w = this.words
    digestWords(key, w)
    return this.findWords(w)
  }

  private findWords(w: Int32Array): number {
    const index = this.index
    const mask = index.length - 1
    const d = this.digest
    for (let i = this.home(w[0], w[1]); ; i = (i + 1) & mask) {
      const e = index[i] - 1
      if (e < 0) return NONE
      const o = e * 8
      if (d[o] === w[0] && d[o + 1] === w[1] && d[o + 2] === w[2] && d[o + 3] === w[3] &&
        d[o + 4] === w[4] && d[o + 5] === w[5] && d[o + 6] === w[6] && d[o + 7] === w[7]) return e
    }
  }

  /** A hit: the entry gets a second chance from eviction. */
  markUsed(e: number) {
    this.flags[e] |= USED
  }

  /** Whether `e` still holds what it held at generation `g`. */
  current(e: number, g: number): boolean {
    return e >= 0 && this.gen[e] === g
  }

  /**
   * Holds `row` under `key` (replacing what the key held), evicting one entry first when full.
   * Returns the entry (-1 when the capacity is 0).
   */
  set(key: string, row: PackedRow, loadedAt: number): number {
    if (this.capacity === 0) return NONE
    const w = this.words
    digestWords(key, w)
    let e = this.findWords(w)
    if (e >= 0) this.release(e)
    else {
      if (this.count === this.capacity) this.evictOne()
      if ((this.count + 1) * 2 > this.index.length) this.grow()
      if (this.freed === 0 && this.top === this.room) this.widen()
      e = this.freed > 0 ? this.freeList[--this.freed] : this.top++
      this.digest.set(w, e * 8)
      const index = this.index
      let i = this.home(w[0], w[1])
      while (index[i] !== 0) i = (i + 1) & (index.length - 1)
      index[i] = e + 1
      this.count++
    }
    this.gen[e]++
    this.loadedAt[e] = loadedAt
    this.expiresAt[e] = row.expiresAt ?? NaN
    this.graceMs[e] = row.graceMs
    this.limit[e] = row.limit
    this.account[e] = this.strings.take(row.accountId)
    this.product[e] = this.strings.take(row.productId)
    this.plan[e] = row.plan === null ? NONE : this.strings.take(row.plan)
    this.policy[e] = row.policyId === null ? NONE : this.strings.take(row.policyId)
    let f = LIVE | STATUSES.indexOf(row.status)
    if (row.keep) f |= KEEP
    if (row.oneKeyPerDevice) f |= ONE_KEY_PER_DEVICE
    if (row.metered) f |= METERED
    if (Object.keys(row.entitlements).length > 0 || row.own !== null || row.relaySeats > 0) {
      f |= OUT_TERMS
      this.terms.set(e, { entitlements: row.entitlements, own: row.own, relaySeats: row.relaySeats })
    }
    this.devices.set(e, row.devices)
    this.flags[e] = f
    return e
  }

  /** Lets go of what entry `e` refers to out of line (strings, side tables). */
  private release(e: number) {
    const f = this.flags[e]
    this.strings.release(this.account[e])
    this.strings.release(this.product[e])
    if (this.plan[e] !== NONE) this.strings.release(this.plan[e])
    if (this.policy[e] !== NONE) this.strings.release(this.policy[e])
    if (f & OUT_TERMS) this.terms.delete(e)
    this.devices.drop(e)
  }

  /** Drops `key`; false when it was not held. */
  delete(key: string): boolean {
    const e = this.find(key)
    if (e < 0) return false
    this.remove(e)
    return true
  }

  private remove(e: number) {
    const index = this.index
    const mask = index.length - 1
    const d = this.digest
    let i = this.home(d[e * 8], d[e * 8 + 1])
    while (index[i] !== e + 1) i = (i + 1) & mask
    // Backward shift: move later members of the probe run into the hole when their home allows it.
    for (let j = (i + 1) & mask; index[j] !== 0; j = (j + 1) & mask) {
      const o = (index[j] - 1) * 8
      const h = this.home(d[o], d[o + 1])
      const between = i <= j ? i < h && h <= j : i < h || h <= j
      if (!between) {
        index[i] = index[j]
        i = j
      }
    }
    index[i] = 0
    this.release(e)
    this.flags[e] = 0
    this.gen[e]++
    this.freeList[this.freed++] = e
    this.count--
  }

  /** CLOCK: passes over entries, clearing USED, and evicts the first one without it. */
  evictOne() {
    for (;;) {
      if (this.hand >= this.top) this.hand = 0
      const e = this.hand++
      const f = this.flags[e]
      if (!(f & LIVE)) continue
      if (f & USED) this.flags[e] = f & ~USED
      else return this.remove(e)
    }
  }

  private grow() {
    const index = new Int32Array(this.index.length * 2)
    this.index = index
    const mask = index.length - 1
    const d = this.digest
    for (let e = 0; e < this.top; e++) {
      if (!(this.flags[e] & LIVE)) continue
      let i = this.home(d[e * 8], d[e * 8 + 1])
      while (index[i] !== 0) i = (i + 1) & mask
      index[i] = e + 1
    }
  }

  /** Adds a device to entry `e` unless it holds it; true when added (the entry changed). */
  addDevice(e: number, fingerprint: string): boolean {
    if (!this.devices.add(e, fingerprint)) return false
    this.gen[e]++
    return true
  }

  /** Entry `e` as a row. */
  row(e: number): PackedRow {
    const f = this.flags[e]
    const plan = this.plan[e]
    const policy = this.policy[e]
    const terms = f & OUT_TERMS ? this.terms.get(e)! : null
    const expiresAt = this.expiresAt[e]
    return {
      accountId: this.strings.get(this.account[e]),
      productId: this.strings.get(this.product[e]),
      status: STATUSES[f & STATUS_BITS],
      plan: plan === NONE ? null : this.strings.get(plan),
      expiresAt: Number.isNaN(expiresAt) ? null : expiresAt,
      limit: this.limit[e],
      devices: this.devices.get(e),
      entitlements: terms?.entitlements ?? NO_ENTITLEMENTS,
      graceMs: this.graceMs[e],
      keep: (f & KEEP) !== 0,
      policyId: policy === NONE ? null : this.strings.get(policy),
      own: terms?.own ?? null,
      oneKeyPerDevice: (f & ONE_KEY_PER_DEVICE) !== 0,
      metered: (f & METERED) !== 0,
      relaySeats: terms?.relaySeats ?? 0,
    }
  }

  clear() {
    for (let e = 0; e < this.top; e++) if (this.flags[e] & LIVE) this.gen[e]++ // outstanding objects go stale
    this.flags.fill(0, 0, this.top)
    this.index = new Int32Array(1024)
    this.devices.clear(this.top)
    this.terms.clear()
    this.strings.clear()
    this.count = this.top = this.freed = this.hand = 0
  }
}

// The active devices of the key table's entries (key-table.ts). Nearly every key has one device, so
// each entry has room for one fingerprint inline (32 bytes in a slab allocated with the table); only a
// key with more goes out of line, in a Map by entry, and even then as bytes: its other fingerprints
// side by side in one Uint8Array (32 bytes each), not as strings. A fingerprint that is not 64
// lower-case hex characters (the schema admits no other, so only old or hand-written rows) cannot be
// packed: such a key keeps its whole list as strings.
import { packFingerprint, samePackedFingerprint, unpackFingerprint } from './packed-digests'

const NO_DEVICES: readonly string[] = Object.freeze([])
/** How an entry holds its devices. */
const NONE = 0
/** One device, inline. */
const ONE = 1
/** The first inline, the others packed out of line. */
const PACKED = 2
/** All of them out of line, as strings. */
const STRINGS = 3

export class EntryDevices {
  private readonly mode: Uint8Array
  private readonly first: Uint8Array
  private more = new Map<number, Uint8Array | readonly string[]>()

  constructor(capacity: number) {
    this.mode = new Uint8Array(capacity)
    this.first = new Uint8Array(capacity * 32)
  }

  /** Holds `devices` for entry `e` (replacing what it held). */
  set(e: number, devices: string | readonly string[]) {
    this.drop(e)
    const list = typeof devices === 'string' ? [devices] : devices
    if (list.length === 0) return
    if (!packFingerprint(list[0], this.first, e * 32)) return this.keepStrings(e, list)
    if (list.length === 1) {
      this.mode[e] = ONE
      return
    }
    const rest = new Uint8Array((list.length - 1) * 32)
    for (let i = 1; i < list.length; i++) if (!packFingerprint(list[i], rest, (i - 1) * 32)) return this.keepStrings(e, list)
    this.more.set(e, rest)
    this.mode[e] = PACKED
  }

  private keepStrings(e: number, list: readonly string[]) {
    this.more.set(e, [...list])
    this.mode[e] = STRINGS
  }

  /** Whether entry `e` holds `fingerprint` (no string made). */
  has(e: number, fingerprint: string): boolean {
    const mode = this.mode[e]
    if (mode === NONE) return false
    if (mode === STRINGS) return (this.more.get(e) as readonly string[]).includes(fingerprint)
    if (samePackedFingerprint(fingerprint, this.first, e * 32)) return true
    if (mode === ONE) return false
    const rest = this.more.get(e) as Uint8Array
    for (let at = 0; at < rest.length; at += 32) if (samePackedFingerprint(fingerprint, rest, at)) return true
    return false
  }

  /** Adds a device to entry `e`; false when it already holds it. */
  add(e: number, fingerprint: string): boolean {
    if (this.has(e, fingerprint)) return false
    const mode = this.mode[e]
    if (mode === NONE) this.set(e, fingerprint)
    else if (mode === STRINGS) this.keepStrings(e, [...(this.more.get(e) as readonly string[]), fingerprint])
    else {
      const rest = mode === PACKED ? (this.more.get(e) as Uint8Array) : new Uint8Array(0)
      const next = new Uint8Array(rest.length + 32)
      next.set(rest)
      if (packFingerprint(fingerprint, next, rest.length)) {
        this.more.set(e, next)
        this.mode[e] = PACKED
      } else this.keepStrings(e, [...this.list(e), fingerprint])
    }
    return true
  }

  /** Entry `e`'s devices: one as the string itself, else an array. */
  get(e: number): string | readonly string[] {
    const mode = this.mode[e]
    if (mode === ONE) return unpackFingerprint(this.first, e * 32)
    if (mode === NONE) return NO_DEVICES
    const list = this.list(e)
    return list.length === 1 ? list[0] : list
  }

  private list(e: number): readonly string[] {
    const mode = this.mode[e]
    if (mode === STRINGS) return this.more.get(e) as readonly string[]
    if (mode === NONE) return NO_DEVICES
    const list = [unpackFingerprint(this.first, e * 32)]
    if (mode === PACKED) {
      const rest = this.more.get(e) as Uint8Array
      for (let at = 0; at < rest.length; at += 32) list.push(unpackFingerprint(rest, at))
    }
    return list
  }

  drop(e: number) {
    if (this.mode[e] >= PACKED) this.more.delete(e)
    this.mode[e] = NONE
  }

  /** Forgets every entry's devices (`top`: entries handed out so far). */
  clear(top: number) {
    this.mode.fill(NONE, 0, top)
    this.more.clear()
  }
}

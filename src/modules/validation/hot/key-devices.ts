// The active devices of the key table's entries (key-table.ts). Nearly every key has one device, so
// each entry has room for one fingerprint inline (32 bytes in a slab allocated with the table); only a
// key with more has its other fingerprints out of line, and even then as bytes, side by side in a
// chunk of one shared arena (device-arena.ts), found through a 4-byte offset per entry: no object and
// no Map entry per key. A fingerprint that is not 64 lower-case hex characters (the schema admits no
// other, so only old or hand-written rows) cannot be packed: such a key keeps its whole list as
// strings, in a Map by entry.
import { resized } from './typed-arrays'
import { DeviceArena } from './device-arena'
import { packFingerprint, samePackedFingerprint, unpackFingerprint } from './packed-digests'

const NO_DEVICES: readonly string[] = Object.freeze([])
/** How an entry holds its devices. */
const NONE = 0
/** One device, inline. */
const ONE = 1
/** The first inline, the others packed in the arena. */
const PACKED = 2
/** All of them out of line, as strings. */
const STRINGS = 3

export class EntryDevices {
  private mode: Uint8Array
  private first: Uint8Array
  /** Where each PACKED entry's chunk starts in the arena. */
  private chunkOf: Int32Array
  private arena = new DeviceArena()
  private strings = new Map<number, readonly string[]>()

  constructor(entries: number) {
    this.mode = new Uint8Array(entries)
    this.first = new Uint8Array(entries * 32)
    this.chunkOf = new Int32Array(entries)
  }

  /** Room for `entries` entries (the key table grows its columns together: key-table.ts `grow`). */
  resize(entries: number) {
    this.mode = resized(this.mode, entries)
    this.first = resized(this.first, entries * 32)
    this.chunkOf = resized(this.chunkOf, entries)
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
    let chunk = this.arena.alloc(list.length - 1)
    for (let i = 1; i < list.length; i++) {
      const next = this.arena.push(chunk, list[i])
      if (next < 0) {
        this.arena.free(chunk)
        return this.keepStrings(e, list)
      }
      chunk = next
    }
    this.chunkOf[e] = chunk
    this.mode[e] = PACKED
  }

  private keepStrings(e: number, list: readonly string[]) {
    this.strings.set(e, [...list])
    this.mode[e] = STRINGS
  }

  /** Whether entry `e` holds `fingerprint` (no string made). */
  has(e: number, fingerprint: string): boolean {
    const mode = this.mode[e]
    if (mode === NONE) return false
    if (mode === STRINGS) return this.strings.get(e)!.includes(fingerprint)
    if (samePackedFingerprint(fingerprint, this.first, e * 32)) return true
    return mode === PACKED && this.arena.has(this.chunkOf[e], fingerprint)
  }

  /** Adds a device to entry `e`; false when it already holds it. */
  add(e: number, fingerprint: string): boolean {
    if (this.has(e, fingerprint)) return false
    const mode = this.mode[e]
    if (mode === NONE) this.set(e, fingerprint)
    else if (mode === STRINGS) this.keepStrings(e, [...this.strings.get(e)!, fingerprint])
    else {
      const chunk = mode === PACKED ? this.chunkOf[e] : this.arena.alloc(1)
      const next = this.arena.push(chunk, fingerprint)
      if (next >= 0) {
        this.chunkOf[e] = next
        this.mode[e] = PACKED
      } else {
        if (mode === ONE) this.arena.free(chunk)
        const list = [...this.list(e), fingerprint]
        this.drop(e)
        this.keepStrings(e, list)
      }
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
    if (mode === STRINGS) return this.strings.get(e)!
    if (mode === NONE) return NO_DEVICES
    const list = [unpackFingerprint(this.first, e * 32)]
    if (mode === PACKED) this.arena.list(this.chunkOf[e], list)
    return list
  }

  drop(e: number) {
    const mode = this.mode[e]
    if (mode === PACKED) this.arena.free(this.chunkOf[e])
    else if (mode === STRINGS) this.strings.delete(e)
    this.mode[e] = NONE
  }

  /** Forgets every entry's devices (`top`: entries handed out so far). */
  clear(top: number) {
    this.mode.fill(NONE, 0, top)
    this.arena = new DeviceArena()
    this.strings.clear()
  }
}

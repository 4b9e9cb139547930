// The fingerprints of keys with more than one device, past their first (key-devices.ts), packed in
// chunks of one growable Uint8Array: a key with two devices costs 36 bytes here and a 4-byte offset,
// where an object per key (or a Map entry) would cost over 100 of its own.
//
// - A chunk: a 4-byte header (byte 0: its size class k, room for 2^k fingerprints; bytes 1-3: how many
//   it holds), then the fingerprints, 32 bytes each.
// - A chunk that fills up moves to one of the next class; freed chunks wait in a list per class and
//   are reused first, so churn does not grow the arena.
// - The arena doubles when full (a copy: it holds only the rare extra devices).
import { resized } from './typed-arrays'
import { packFingerprint, samePackedFingerprint, unpackFingerprint } from './packed-digests'

const packed = new Uint8Array(32)

export class DeviceArena {
  private bytes = new Uint8Array(4096)
  private end = 0
  private freed: number[][] = []

  /** A new empty chunk with room for at least `n` fingerprints; returns its offset. */
  alloc(n: number): number {
    let k = 0
    while (1 << k < n) k++
    let at = this.freed[k]?.pop()
    if (at === undefined) {
      const size = 4 + 32 * (1 << k)
      let length = this.bytes.length
      while (this.end + size > length) length *= 2
      if (length > this.bytes.length) this.bytes = resized(this.bytes, length)
      at = this.end
      this.end += size
    }
    this.bytes[at] = k
    this.setCount(at, 0)
    return at
  }

  free(at: number) {
    ;(this.freed[this.bytes[at]] ??= []).push(at)
  }

  private count(at: number): number {
    const b = this.bytes
    return b[at + 1] | (b[at + 2] << 8) | (b[at + 3] << 16)
  }

  private setCount(at: number, n: number) {
    const b = this.bytes
    b[at + 1] = n & 0xff
    b[at + 2] = (n >>> 8) & 0xff
    b[at + 3] = (n >>> 16) & 0xff
  }

  /**
   * Appends `fingerprint` to the chunk at `at`; returns the chunk's offset (another one when it had
   * to move), or -1 when the fingerprint cannot be packed (then nothing changed).
   */
  push(at: number, fingerprint: string): number {
    if (!packFingerprint(fingerprint, packed, 0)) return -1
    const n = this.count(at)
    if (n === 1 << this.bytes[at]) {
      const moved = this.alloc(n + 1) // may grow the arena: read this.bytes afresh below
      this.bytes.copyWithin(moved + 4, at + 4, at + 4 + 32 * n)
      this.setCount(moved, n)
      this.free(at)
      at = moved
    }
    this.bytes.set(packed, at + 4 + 32 * n)
    this.setCount(at, n + 1)
    return at
  }

  /** Whether the chunk at `at` holds `fingerprint`. */
  has(at: number, fingerprint: string): boolean {
    for (let i = 0, n = this.count(at); i < n; i++) if (samePackedFingerprint(fingerprint, this.bytes, at + 4 + 32 * i)) return true
    return false
  }

  /** Appends the chunk's fingerprints to `out`, as strings. */
  list(at: number, out: string[]) {
    for (let i = 0, n = this.count(at); i < n; i++) out.push(unpackFingerprint(this.bytes, at + 4 + 32 * i))
  }
}

// A small memo of secret → its SHA-256-derived form (the API-token hash, a key value's hot-state key),
// so a repeat caller costs two non-cryptographic hashes instead of a SHA-256 (plus the parsing that
// precedes it). The secret itself is never stored: a slot holds two hashes of it under per-process
// random seeds (xxHash32 picks the slot and must match, wyhash64 must match) and its length: 96 bits
// that must all agree. A stale or colliding slot can only make us recompute the digest, never return
// another secret's: to be answered another secret's digest, an input would have to match 96 seeded
// bits of a secret it does not know (a blind guess, as hopeless as guessing the secret itself).
// What the digest means (a principal, a key state) is looked up afterwards as before, so revocations
// and invalidations keep working exactly as they did: this only skips recomputing a pure function.
// Direct-mapped: fixed memory, no eviction bookkeeping; a newer secret simply takes the slot.
import { randomBytes } from 'node:crypto'

interface Slot<T> {
  first: number
  second: bigint
  length: number
  digest: T
}

/** `T`: the digest, or an object that holds it (the validate engine keeps a KeyRef: the digest and what it found last). */
export class DigestMemo<T = string> {
  private slots: (Slot<T> | undefined)[]
  private readonly mask: number
  private readonly seedA = randomBytes(4).readUInt32LE()
  private readonly seedB = randomBytes(8).readBigUInt64LE()

  /** `size`: slots, a power of two. */
  constructor(size: number) {
    this.slots = new Array<Slot<T> | undefined>(size).fill(undefined)
    this.mask = size - 1
  }

  get(secret: string): T | undefined {
    const first = Bun.hash.xxHash32(secret, this.seedA)
    const slot = this.slots[first & this.mask]
    if (slot === undefined || slot.first !== first || slot.length !== secret.length) return undefined
    return slot.second === Bun.hash.wyhash(secret, this.seedB) ? slot.digest : undefined
  }

  set(secret: string, digest: T) {
    const first = Bun.hash.xxHash32(secret, this.seedA)
    this.slots[first & this.mask] = { first, second: Bun.hash.wyhash(secret, this.seedB), length: secret.length, digest }
  }
}

// A fixed-size table of keys known NOT to exist (negative entries) and when that was read. It is kept
// apart from the cache of known keys on purpose: anyone holding a validate token can send random
// keys, and if their negative entries shared the known keys' bound they would push the known keys
// out (everyone's validate falling back to Postgres). Here a flood only churns this table.
//
// - Fixed memory: `capacity` slots allocated once (a slot holds a reference to the key string and
//   its time); a new key takes a slot of its pair, nothing grows.
// - Two-way: a key may sit in either slot of its pair (picked by a seeded hash). A key answered from
//   the table is marked; a new key takes an empty slot, else an unmarked one (the older of two), so a
//   repeated unknown key (an app shipped with a deleted key) survives a flood of one-off guesses.
//   When both are marked the new key is not kept (one more query for it next time, nothing lost).
// - Exact: the whole key is compared, never a hash of it, so a real key is never taken for absent.
import { randomBytes } from 'node:crypto'

export class AbsentKeys {
  private readonly keys: (string | undefined)[]
  private readonly at: Float64Array
  private readonly marked: Uint8Array
  private readonly pairs: number
  private readonly seed = randomBytes(4).readUInt32LE()
  private count = 0

  /** `capacity`: slots (rounded down to an even number); 0 keeps nothing. */
  constructor(capacity: number) {
    this.pairs = Math.max(0, Math.floor(capacity / 2))
    this.keys = new Array<string | undefined>(this.pairs * 2).fill(undefined)
    this.at = new Float64Array(this.pairs * 2)
    this.marked = new Uint8Array(this.pairs * 2)
  }

  get size() {
    return this.count
  }

  private pairOf(key: string): number {
    return (Bun.hash.xxHash32(key, this.seed) % this.pairs) * 2
  }

  /** When `key` was read as absent, if the table still holds it (and marks it as used). */
  since(key: string): number | undefined {
    if (this.count === 0) return undefined
    const i = this.pairOf(key)
    const slot = this.keys[i] === key ? i : this.keys[i + 1] === key ? i + 1 : -1
    if (slot < 0) return undefined
    this.marked[slot] = 1
    return this.at[slot]
  }

  set(key: string, at: number) {
    if (this.pairs === 0) return
    const i = this.pairOf(key)
    const a = this.keys[i]
    const b = this.keys[i + 1]
    if (a === key || b === key) {
      this.at[a === key ? i : i + 1] = at // the same key read again: it keeps its mark
      return
    }
    let slot: number
    if (a === undefined) slot = i
    else if (b === undefined) slot = i + 1
    else {
      const ma = this.marked[i]
      const mb = this.marked[i + 1]
      if (ma && mb) {
        // Both in use: the newcomer is not kept, and both lose their mark (a second chance, as in
        // CLOCK): the next newcomer takes the place of one not used again meanwhile.
        this.marked[i] = this.marked[i + 1] = 0
        return
      }
      if (ma !== mb) slot = ma ? i + 1 : i
      else slot = this.at[i] <= this.at[i + 1] ? i : i + 1
    }
    if (this.keys[slot] === undefined) this.count++
    this.keys[slot] = key
    this.at[slot] = at
    this.marked[slot] = 0
  }

  delete(key: string) {
    if (this.count === 0) return
    const i = this.pairOf(key)
    const slot = this.keys[i] === key ? i : this.keys[i + 1] === key ? i + 1 : -1
    if (slot < 0) return
    this.keys[slot] = undefined
    this.marked[slot] = 0
    this.count--
  }

  clear() {
    if (this.count === 0) return
    this.keys.fill(undefined)
    this.marked.fill(0)
    this.count = 0
  }
}

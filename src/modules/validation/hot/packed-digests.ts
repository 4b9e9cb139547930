// The byte forms the packed key table (key-table.ts) stores instead of strings: a hot-state key (a
// SHA-256 digest in base64, 44 characters) as eight 32-bit words, and a device fingerprint (64
// lower-case hex characters) as 32 bytes. Both are decoded by hand into preallocated arrays: this runs
// on lookups, and Buffer.from would allocate a buffer per call.
import { createHash } from 'node:crypto'

const B64 = new Int8Array(128).fill(-1)
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
for (let i = 0; i < 64; i++) B64[ALPHABET.charCodeAt(i)] = i
const HEX = new Int8Array(128).fill(-1)
for (let i = 0; i < 16; i++) HEX['0123456789abcdef'.charCodeAt(i)] = i

/** Four base64 characters from `i` as 24 bits; negative when one is not base64. */
function group(s: string, i: number): number {
  const a = B64[s.charCodeAt(i) & 127]
  const b = B64[s.charCodeAt(i + 1) & 127]
  const c = B64[s.charCodeAt(i + 2) & 127]
  const d = B64[s.charCodeAt(i + 3) & 127]
  return (a | b | c | d) < 0 || (s.charCodeAt(i) | s.charCodeAt(i + 1) | s.charCodeAt(i + 2) | s.charCodeAt(i + 3)) > 127
    ? -1
    : (a << 18) | (b << 12) | (c << 6) | d
}

/**
 * Writes the 32-byte digest named by `key` into `out` (8 big-endian words). A key that is not a digest
 * in canonical base64 (only tests use such names) is hashed first, so every key has 32 bytes and keys
 * are always compared whole: two different strings never share an entry.
 */
export function digestWords(key: string, out: Int32Array) {
  if (!decodeDigest(key, out)) {
    const bytes = createHash('sha256').update(`not-a-digest:${key}`).digest()
    for (let i = 0; i < 8; i++) out[i] = bytes.readInt32BE(i * 4)
  }
}

/** The canonical base64 form of a 32-byte digest into `out`; false when `key` is not one. */
function decodeDigest(s: string, out: Int32Array): boolean {
  if (s.length !== 44 || s.charCodeAt(43) !== 61) return false
  let bad = 0
  for (let w = 0, i = 0; w < 6; w += 3, i += 16) {
    const g0 = group(s, i)
    const g1 = group(s, i + 4)
    const g2 = group(s, i + 8)
    const g3 = group(s, i + 12)
    bad |= g0 | g1 | g2 | g3
    out[w] = (g0 << 8) | (g1 >>> 16)
    out[w + 1] = (g1 << 16) | (g2 >>> 8)
    out[w + 2] = (g2 << 24) | g3
  }
  const g0 = group(s, 32)
  const g1 = group(s, 36)
  const c40 = B64[s.charCodeAt(40) & 127]
  const c41 = B64[s.charCodeAt(41) & 127]
  const c42 = B64[s.charCodeAt(42) & 127]
  // the last character's two low bits are padding: non-zero ones are another spelling of the same bytes
  bad |= g0 | g1 | c40 | c41 | c42 | -(c42 & 3) | -(s.charCodeAt(40) >> 7) | -(s.charCodeAt(41) >> 7) | -(s.charCodeAt(42) >> 7)
  const g2 = (c40 << 18) | (c41 << 12) | (c42 << 6)
  out[6] = (g0 << 8) | (g1 >>> 16)
  out[7] = (g1 << 16) | (g2 >>> 8)
  return bad >= 0
}

/** Writes a 64-character lower-case hex fingerprint as 32 bytes at `at`; false (nothing sure written) for any other string. */
export function packFingerprint(fp: string, out: Uint8Array, at: number): boolean {
  if (fp.length !== 64) return false
  for (let i = 0; i < 32; i++) {
    const hi = fp.charCodeAt(2 * i)
    const lo = fp.charCodeAt(2 * i + 1)
    const h = HEX[hi & 127]
    const l = HEX[lo & 127]
    if ((h | l) < 0 || (hi | lo) > 127) return false
    out[at + i] = (h << 4) | l
  }
  return true
}

/** Whether `fp` is the fingerprint packed at `at` (no string made). */
export function samePackedFingerprint(fp: string, bytes: Uint8Array, at: number): boolean {
  if (fp.length !== 64) return false
  for (let i = 0; i < 32; i++) {
    const h = HEX[fp.charCodeAt(2 * i) & 127]
    const l = HEX[fp.charCodeAt(2 * i + 1) & 127]
    if ((h | l) < 0 || ((h << 4) | l) !== bytes[at + i] || (fp.charCodeAt(2 * i) | fp.charCodeAt(2 * i + 1)) > 127) return false
  }
  return true
}

const unpacked = Buffer.alloc(32)

/** The fingerprint packed at `at`, as its hex string (copied through one reused buffer: no view object per call). */
export function unpackFingerprint(bytes: Uint8Array, at: number): string {
  for (let i = 0; i < 32; i++) unpacked[i] = bytes[at + i]
  return unpacked.toString('hex')
}

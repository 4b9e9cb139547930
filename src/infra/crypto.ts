// Identifiers, secrets and their at-rest forms. Nothing here logs or stores a plaintext secret.
import { createCipheriv, createDecipheriv, hash, randomBytes, randomFillSync } from 'node:crypto'
import type { IdPrefix } from '../core/ids'

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** Uniformly random characters from `alphabet` (rejection sampling, no modulo bias). */
function randomChars(alphabet: string, n: number): string {
  const limit = 256 - (256 % alphabet.length)
  let out = ''
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < limit) out += alphabet[b % alphabet.length]
      if (out.length === n) break
    }
  }
  return out
}

// Ids are not secrets, and a request id is minted on every request: their random part is drawn from a
// pool refilled 4 KiB at a time (one getrandom call per 256 ids instead of one per id). 256 is a
// multiple of 32, so `byte & 31` is uniform. Tokens and key values keep drawing fresh bytes.
const idPool = Buffer.allocUnsafe(4096)
let idPoolAt = idPool.length
let lastMs = -1
let lastTime = ''

const lastRand = new Uint8Array(16)

/** ULID: 10 chars of millisecond time + 16 random Crockford chars, so ids sort by creation time. */
export function ulid(now = Date.now()): string {
  if (now !== lastMs) {
    let time = ''
    for (let i = 0, ms = now; i < 10; i++, ms = Math.floor(ms / 32)) time = CROCKFORD[ms % 32] + time
    lastMs = now
    lastTime = time
    if (idPoolAt + 16 > idPool.length) {
      randomFillSync(idPool)
      idPoolAt = 0
    }
    for (let i = 0; i < 16; i++) lastRand[i] = idPool[idPoolAt++] & 31
  } else {
    // Monotonic within a millisecond (the ULID spec's monotonic mode): the random part counts up, so
    // ids made by one process sort in creation order even when their timestamps tie ("ties by id").
    for (let i = 15; i >= 0; i--) {
      if (lastRand[i] < 31) {
        lastRand[i]++
        break
      }
      lastRand[i] = 0
    }
  }
  let rand = ''
  for (let i = 0; i < 16; i++) rand += CROCKFORD[lastRand[i]]
  return lastTime + rand
}

export const newId = (prefix: IdPrefix) => `${prefix}_${ulid()}`

// Request ids are minted on every request, so they are built from parts that rarely change instead of
// 16 random characters each: `req_` + 10 chars of millisecond time + 8 random chars drawn once per
// process + an 8-char counter (random start). Still a 26-char Crockford ULID shape that sorts by time;
// unique within a process for 2^40 ids and across processes through the 40-bit process part. Only the
// last two characters change per id (a table of the 1024 pairs), the rest is one cached string.
const PAIRS = Array.from({ length: 1024 }, (_, i) => CROCKFORD[i >> 5] + CROCKFORD[i & 31])
const PROCESS_PART = randomChars(CROCKFORD, 8)
let requestCounter = randomBytes(4).readUInt32BE() // 32 random bits of start within the 40-bit counter
let requestMs = -1
let requestHigh = -1
let requestPrefix = ''

export function newRequestId(now = Date.now()): string {
  const n = requestCounter++
  const high = Math.floor(n / 1024) % 2 ** 30 // the counter's upper 30 bits: 6 chars
  if (now !== requestMs || high !== requestHigh) {
    requestMs = now
    let time = ''
    for (let i = 0, ms = now; i < 10; i++, ms = Math.floor(ms / 32)) time = CROCKFORD[ms % 32] + time
    let counter = ''
    for (let i = 0, h = high; i < 6; i++, h = Math.floor(h / 32)) counter = CROCKFORD[h % 32] + counter
    requestHigh = high
    requestPrefix = flatten(`req_${time}${PROCESS_PART}${counter}`)
  }
  return requestPrefix + PAIRS[n & 1023]
}

/**
 * The same text as one flat string. JavaScriptCore keeps `a + b` as a rope and copies its pieces each
 * time a rope is read (a header value, a joined log batch) without flattening the shared pieces, so a
 * prefix built from ~20 concatenations and then shared by a thousand ids is walked on every use:
 * measured ≈190 ns more per Headers.set of a request id. ASCII only (ids, log prefixes).
 */
export const flatten = (ascii: string) => Buffer.from(ascii, 'latin1').toString('latin1')

// The id shape is declared once in core (the console checks ids from its address with it).
export { isId, type IdPrefix } from '../core/ids'

/** API token: `kw_` + 32 random [A-Za-z0-9] (~190 bits). */
export const newApiToken = () => `kw_${randomChars(ALNUM, 32)}`
export const API_TOKEN_RE = /^kw_[A-Za-z0-9]{32}$/

// One-shot digest: about half the cost of createHash().update().digest(), and it runs twice per validate.
export const sha256Hex = (text: string) => hash('sha256', text, 'hex')

/** License key value: 25 Crockford base32 chars (125 random bits) in five groups of five. */
export function newKeyValue(): string {
  const s = randomChars(CROCKFORD, 25)
  return `${s.slice(0, 5)}-${s.slice(5, 10)}-${s.slice(10, 15)}-${s.slice(15, 20)}-${s.slice(20)}`
}

/**
 * The canonical form a key value is hashed in: surrounding whitespace dropped, upper case, hyphens
 * removed (so `abcde-fghjk-…` and `ABCDEFGHJK…` are the same key). Null when it cannot be a key.
 */
export function normalizeKeyValue(input: string): string | null {
  const s = input.trim().toUpperCase().replaceAll('-', '')
  return /^[0-9A-HJKMNP-TV-Z]{25}$/.test(s) ? s : null
}

/** The stored form of a key value (hex, the key_hash column); base64 is the same digest, shorter in memory. */
export const hashKeyValue = (canonical: string, encoding: 'hex' | 'base64' = 'hex') =>
  hash('sha256', `license-key:${canonical}`, encoding)

/** AES-256-GCM with the configured SECRET_KEY: `v1.<iv>.<tag>.<ciphertext>` in base64url. */
export function seal(secretKey: Uint8Array, plaintext: string | Uint8Array): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', secretKey, iv)
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return ['v1', iv, cipher.getAuthTag(), body].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.')
}

export function open(secretKey: Uint8Array, sealed: string): Buffer {
  const [v, iv, tag, body] = sealed.split('.')
  if (v !== 'v1' || !iv || !tag || body === undefined) throw new Error('unrecognised sealed secret')
  const decipher = createDecipheriv('aes-256-gcm', secretKey, Buffer.from(iv, 'base64url'))
  decipher.setAuthTag(Buffer.from(tag, 'base64url'))
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()])
}

// ---- Imported key values (docs/api.md, "Import and export"): each keeps its own lookup --------------------------------------
/** What a value imported as it is must be: 6..256 characters once trimmed, no control character. */
export const IMPORTED_VALUE_RE = /^[^\u0000-\u001F\u007F-\u009F]{6,256}$/

/**
 * A value's portable hash, the one an export carries: the hash of the canonical form for a value in
 * Keyward's format (forgiving: case, hyphens, spaces around), else of the exact trimmed value
 * (case-sensitive). Null when the value can be neither.
 */
export function portableKeyHash(value: string, encoding: 'hex' | 'base64' = 'hex'): string | null {
  const canonical = normalizeKeyValue(value)
  if (canonical !== null) return hashKeyValue(canonical, encoding)
  const exact = value.trim()
  return IMPORTED_VALUE_RE.test(exact) ? hashKeyValue(exact, encoding) : null
}

/** The hash a key is stored under in `accountId` when another account already holds its portable hash. */
export const scopedKeyHash = (accountId: string, portableHex: string, encoding: 'hex' | 'base64' = 'hex') =>
  hash('sha256', `license-key@${accountId}:${portableHex}`, encoding)

/** The hash a key imported by SHA-256 only waits under, until its first validate re-hashes it. */
export const pendingKeyHash = (accountId: string, sha256Hex: string, encoding: 'hex' | 'base64' = 'hex') =>
  hash('sha256', `license-key-sha256@${accountId}:${sha256Hex}`, encoding)

/** An imported value shorter than this shows no key_prefix at all (docs/migrating.md). */
export const MIN_PREFIXED_VALUE = 12

/**
 * The start of a value as key_prefix shows it: a Keyward value's first 5 canonical characters (of 25);
 * any other value's first third at most (5 characters at most), and nothing when it is shorter than
 * MIN_PREFIXED_VALUE: a prefix is for support look-ups and must not give away most of a short secret.
 */
export function keyPrefixOf(value: string): string {
  const canonical = normalizeKeyValue(value)
  if (canonical !== null) return canonical.slice(0, 5)
  const chars = [...value.trim()]
  if (chars.length < MIN_PREFIXED_VALUE) return ''
  return chars.slice(0, Math.min(5, Math.floor(chars.length / 3))).join('')
}

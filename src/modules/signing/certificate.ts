// KWCERT1: the root's word that a signing key belongs to the account (docs/api.md, "Certificates").
//
//   KWCERT1.<base64url(JSON {kid, public_key, account_id, created_at})>.<base64url(root signature)>
//
// The root signs the ASCII text before the last dot ("KWCERT1.<payload>"), so a verifier checks the
// signature over exactly the bytes it received and never re-serialises JSON. The JSON holds exactly
// these four fields in this order; public_key is the raw 32-byte key in standard base64, as everywhere
// in JSON objects; created_at is ISO 8601 with milliseconds and Z.
//
// A relay's certificate (docs/api.md, "The relay license") adds a fifth field, `scope` {relay_id,
// key_id, seats, expires_at}, has the relay_id as its kid and is signed by the account's signer. The
// two never pass for each other: verifyCertificate refuses a scope, verifyRelayCertificate requires one.
import { createPublicKey, sign, verify, type KeyObject } from 'node:crypto'
import { kidOfRaw } from './keys'

export const CERTIFICATE_PREFIX = 'KWCERT1'
/** Far above any certificate we issue (~300 characters); bounds the work spent on a hostile input. */
const MAX_TEXT = 2048
const B64URL = /^[A-Za-z0-9_-]+$/

export interface CertifiedKey {
  kid: string
  /** Raw 32-byte Ed25519 public key, standard base64. */
  public_key: string
  account_id: string
  created_at: string
}

/** What a relay's certificate allows its key: answers for one license key's seats, until expires_at. */
export interface RelayScope {
  relay_id: string
  key_id: string
  seats: number
  expires_at: string
}

export function makeCertificate(root: KeyObject, c: CertifiedKey): string {
  return signed(root, { kid: c.kid, public_key: c.public_key, account_id: c.account_id, created_at: c.created_at })
}

/** The relay's KWCERT1: its key, certified by `signer` (the account's current signer) for `scope`; kid = relay_id. */
export function makeRelayCertificate(signer: KeyObject, c: Omit<CertifiedKey, 'kid'> & { scope: RelayScope }): string {
  const scope = { relay_id: c.scope.relay_id, key_id: c.scope.key_id, seats: c.scope.seats, expires_at: c.scope.expires_at }
  return signed(signer, { kid: scope.relay_id, public_key: c.public_key, account_id: c.account_id, created_at: c.created_at, scope })
}

function signed(by: KeyObject, payload: object): string {
  const text = `${CERTIFICATE_PREFIX}.${Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')}`
  return `${text}.${sign(null, Buffer.from(text, 'ascii'), by).toString('base64url')}`
}

/**
 * The key a certificate vouches for, or null when it is not one signed by `root` (malformed, another
 * root, a kid that is not its public key's, another account's when `accountId` is given, a relay's
 * certificate: one with a scope). Never throws.
 */
export function verifyCertificate(root: KeyObject, text: unknown, accountId?: string): (CertifiedKey & { publicKey: KeyObject }) | null {
  const c = readSigned(root, text)
  if (c === null || 'scope' in c || typeof c.kid !== 'string' || typeof c.public_key !== 'string') return null
  const raw = rawKeyOf(c.public_key)
  if (raw === null || kidOfRaw(raw) !== c.kid) return null
  return certified(c, raw, accountId)
}

/**
 * A relay's certificate signed by `signer` (the signer's own key: the root, or a signing key already
 * checked against the root): the relay's key and its scope, or null (malformed, another signer, no
 * scope, a kid that is not the scope's relay_id, another account's when `accountId` is given). Never throws.
 */
export function verifyRelayCertificate(
  signer: KeyObject,
  text: unknown,
  accountId?: string,
): (CertifiedKey & { publicKey: KeyObject; scope: RelayScope }) | null {
  const c = readSigned(signer, text)
  const s = c?.scope as Record<string, unknown> | undefined
  if (c === null || s === null || typeof s !== 'object' || Array.isArray(s)) return null
  if (typeof s.relay_id !== 'string' || typeof s.key_id !== 'string' || typeof s.expires_at !== 'string') return null
  if (typeof s.seats !== 'number' || !Number.isInteger(s.seats) || s.seats < 1 || c.kid !== s.relay_id) return null
  const raw = typeof c.public_key === 'string' ? rawKeyOf(c.public_key) : null
  const key = raw === null ? null : certified(c, raw, accountId)
  if (key === null) return null
  return { ...key, scope: { relay_id: s.relay_id, key_id: s.key_id, seats: s.seats, expires_at: s.expires_at } }
}

/** The JSON of a KWCERT1 whose signature `by` made, or null. */
function readSigned(by: KeyObject, text: unknown): Record<string, unknown> | null {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return null
  const parts = text.split('.')
  if (parts.length !== 3 || parts[0] !== CERTIFICATE_PREFIX || !B64URL.test(parts[1]!) || !B64URL.test(parts[2]!)) return null
  const signature = Buffer.from(parts[2]!, 'base64url')
  if (signature.length !== 64) return null
  try {
    if (!verify(null, Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'), by, signature)) return null
    const c = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(parts[1]!, 'base64url'))) as unknown
    return c !== null && typeof c === 'object' && !Array.isArray(c) ? (c as Record<string, unknown>) : null
  } catch {
    return null
  }
}

/** The raw 32 bytes of a public key in standard base64 (exactly as written), or null. */
function rawKeyOf(publicKey: string): Buffer | null {
  const raw = Buffer.from(publicKey, 'base64')
  return raw.length === 32 && raw.toString('base64') === publicKey ? raw : null
}

function certified(c: Record<string, unknown>, raw: Buffer, accountId?: string): (CertifiedKey & { publicKey: KeyObject }) | null {
  if (typeof c.kid !== 'string' || typeof c.account_id !== 'string' || typeof c.created_at !== 'string') return null
  if (accountId !== undefined && c.account_id !== accountId) return null
  try {
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' })
    return { kid: c.kid, public_key: raw.toString('base64'), account_id: c.account_id, created_at: c.created_at, publicKey }
  } catch {
    return null
  }
}

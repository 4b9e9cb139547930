// KWCERT1: the root's word that a signing key belongs to the account (docs/api.md, "Certificates").
//
//   KWCERT1.<base64url(JSON {kid, public_key, account_id, created_at})>.<base64url(root signature)>
//
// The root signs the ASCII text before the last dot ("KWCERT1.<payload>"), so a verifier checks the
// signature over exactly the bytes it received and never re-serialises JSON. The JSON holds exactly
// these four fields in this order; public_key is the raw 32-byte key in standard base64, as everywhere
// in JSON objects; created_at is ISO 8601 with milliseconds and Z.
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

export function makeCertificate(root: KeyObject, c: CertifiedKey): string {
  const payload = { kid: c.kid, public_key: c.public_key, account_id: c.account_id, created_at: c.created_at }
  const signed = `${CERTIFICATE_PREFIX}.${Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')}`
  return `${signed}.${sign(null, Buffer.from(signed, 'ascii'), root).toString('base64url')}`
}

/**
 * The key a certificate vouches for, or null when it is not one signed by `root` (malformed, another
 * root, a kid that is not its public key's, another account's when `accountId` is given). Never throws.
 */
export function verifyCertificate(root: KeyObject, text: unknown, accountId?: string): (CertifiedKey & { publicKey: KeyObject }) | null {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return null
  const parts = text.split('.')
  if (parts.length !== 3 || parts[0] !== CERTIFICATE_PREFIX || !B64URL.test(parts[1]!) || !B64URL.test(parts[2]!)) return null
  const signature = Buffer.from(parts[2]!, 'base64url')
  if (signature.length !== 64) return null
  try {
    if (!verify(null, Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'), root, signature)) return null
    const c = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(parts[1]!, 'base64url'))) as Record<string, unknown>
    if (typeof c.kid !== 'string' || typeof c.public_key !== 'string' || typeof c.account_id !== 'string' || typeof c.created_at !== 'string') return null
    const raw = Buffer.from(c.public_key, 'base64')
    if (raw.length !== 32 || raw.toString('base64') !== c.public_key || kidOfRaw(raw) !== c.kid) return null
    if (accountId !== undefined && c.account_id !== accountId) return null
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' })
    return { kid: c.kid, public_key: c.public_key, account_id: c.account_id, created_at: c.created_at, publicKey }
  } catch {
    return null
  }
}

// The offline license text and its Ed25519 signature. Pure functions (no database, no config) so the
// format is easy to read next to the README's verification recipe:
//
//   -----BEGIN KEYWARD LICENSE-----
//   base64 of {"enc": base64(payload JSON), "sig": base64(Ed25519("license/" + enc)), "alg", "kid"}
//   -----END KEYWARD LICENSE-----
//
// The signature covers the base64 text `enc` exactly as transmitted, so a verifier never has to
// re-serialise JSON (no canonicalisation questions) and the "license/" prefix keeps a signature over
// a license from being valid for any other message the key might ever sign.
import { createHash, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto'
import { nestsDeeperThan } from '../../core/json-depth'

export const LICENSE_ALG = 'base64+ed25519'
export const SIGNING_PREFIX = 'license/'
const BEGIN = '-----BEGIN KEYWARD LICENSE-----'
const END = '-----END KEYWARD LICENSE-----'
/** Far above any license we issue (~1 KiB); bounds the work spent on a hostile input. */
const MAX_TEXT = 16 * 1024
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

export interface LicensePayload {
  v: 1
  id: string
  account_id: string
  key_id: string
  product_id: string
  plan: string | null
  device_fingerprint: string
  issued_at: string
  expires_at: string
  /** the key's effective entitlements when issued (absent in licenses issued before they existed) */
  entitlements?: Record<string, true | number | string>
}

export interface GeneratedKeyPair {
  kid: string
  publicKeyPem: string
  /** PKCS#8 DER of the private key: the caller seals it before it goes anywhere. */
  privateKeyPkcs8: Buffer
}

/** The raw 32-byte Ed25519 public key (what libsodium and most embedded verifiers take). */
export function rawPublicKey(publicKey: KeyObject): Buffer {
  return Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url')
}

/** Key id: derived from the public key itself, so it is stable and names exactly one key. */
export const kidOf = (publicKey: KeyObject) => createHash('sha256').update(rawPublicKey(publicKey)).digest('hex').slice(0, 32)

export function generateKeyPair(): GeneratedKeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  return {
    kid: kidOf(publicKey),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    privateKeyPkcs8: privateKey.export({ format: 'der', type: 'pkcs8' }),
  }
}

/** Signs `payload` into the license text (base64 wrapped at 64 columns, like PEM). */
export function signLicense(privateKey: KeyObject, kid: string, payload: LicensePayload): string {
  const enc = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64')
  const sig = sign(null, Buffer.from(SIGNING_PREFIX + enc, 'utf8'), privateKey).toString('base64')
  const body = Buffer.from(JSON.stringify({ enc, sig, alg: LICENSE_ALG, kid }), 'utf8').toString('base64')
  return `${BEGIN}\n${body.match(/.{1,64}/g)!.join('\n')}\n${END}\n`
}

export interface ParsedLicense {
  enc: string
  sig: Buffer
  kid: string
  /** The decoded payload, NOT yet trusted: only `verifyLicense` makes it so. */
  payload: unknown
}

const strictBase64 = (s: string) => (s.length > 0 && BASE64.test(s) ? Buffer.from(s, 'base64') : null)

/** Reads the envelope of a license text; null for anything that is not one (never throws). */
export function parseLicense(text: unknown): ParsedLicense | null {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return null
  const trimmed = text.trim()
  if (!trimmed.startsWith(BEGIN) || !trimmed.endsWith(END)) return null
  const outer = strictBase64(trimmed.slice(BEGIN.length, trimmed.length - END.length).replace(/\s+/g, ''))
  if (!outer) return null
  const envelope = parseJson(outer)
  if (!envelope || typeof envelope !== 'object') return null
  const { enc, sig, alg, kid } = envelope as Record<string, unknown>
  if (typeof enc !== 'string' || typeof sig !== 'string' || typeof kid !== 'string' || alg !== LICENSE_ALG) return null
  const signature = strictBase64(sig)
  const payloadBytes = strictBase64(enc)
  if (!signature || signature.length !== 64 || !payloadBytes) return null
  return { enc, sig: signature, kid, payload: parseJson(payloadBytes) }
}

export function verifyLicense(publicKey: KeyObject, license: ParsedLicense): boolean {
  try {
    return verify(null, Buffer.from(SIGNING_PREFIX + license.enc, 'utf8'), publicKey, license.sig)
  } catch {
    return false
  }
}

/** JSON inside a license, read before its signature is checked: held to a body's depth rule (http/kernel.ts). */
function parseJson(bytes: Buffer): unknown {
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
    return nestsDeeperThan(text) ? null : JSON.parse(text)
  } catch {
    return null
  }
}

// The offline license text and its Ed25519 signature. Pure functions (no database, no config) so the
// format is easy to read next to the README's verification recipe:
//
//   -----BEGIN KEYWARD LICENSE-----
//   base64 of {"enc": base64(payload JSON), "sig": base64(Ed25519("license/" + enc)), "alg", "kid", "certificate"?}
//   -----END KEYWARD LICENSE-----
//
// The signature covers the base64 text `enc` exactly as transmitted, so a verifier never has to
// re-serialise JSON (no canonicalisation questions) and the "license/" prefix keeps a signature over
// a license from being valid for any other message the key might ever sign. Payload v2 carries the
// signer's kid inside the signed bytes; the envelope carries the signer's KWCERT1 certificate when the
// signer is not the account's root (docs/api.md, "Offline licenses"). A v1 license (root-signed, no
// kid inside) still verifies. A relay license (docs/api.md, "The relay license") has its own payload
// (kind "relay") and carries the relay's certificate in the envelope as `relay_certificate`.
import { sign, verify, type KeyObject } from 'node:crypto'
import { nestsDeeperThan } from '../../core/json-depth'

export const LICENSE_ALG = 'base64+ed25519'
export const SIGNING_PREFIX = 'license/'
const BEGIN = '-----BEGIN KEYWARD LICENSE-----'
const END = '-----END KEYWARD LICENSE-----'
/** Far above any license we issue (~1 KiB); bounds the work spent on a hostile input. */
const MAX_TEXT = 16 * 1024
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

export interface LicensePayload {
  v: 1 | 2
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
  /** v2: the signer's kid, inside the signed bytes (equal to the envelope's) */
  kid?: string
}

/**
 * Signs `payload` into the license text (base64 wrapped at 64 columns, like PEM); `certificate`: the
 * signer's KWCERT1 when it is not the root (null or omitted for the root).
 */
export function signLicense<P extends { v: 1 | 2 } = LicensePayload>(
  privateKey: KeyObject,
  kid: string,
  payload: P,
  certificate: string | null = null,
  relayCertificate: string | null = null,
): string {
  const enc = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64')
  const sig = sign(null, Buffer.from(SIGNING_PREFIX + enc, 'utf8'), privateKey).toString('base64')
  const envelope: Record<string, string> = { enc, sig, alg: LICENSE_ALG, kid }
  if (certificate !== null) envelope.certificate = certificate
  if (relayCertificate !== null) envelope.relay_certificate = relayCertificate
  const body = Buffer.from(JSON.stringify(envelope), 'utf8').toString('base64')
  return `${BEGIN}\n${body.match(/.{1,64}/g)!.join('\n')}\n${END}\n`
}

export interface ParsedLicense {
  enc: string
  sig: Buffer
  kid: string
  /** The signer's KWCERT1 when the envelope carries one (NOT yet trusted). */
  certificate: string | null
  /** A relay license's KWCERT1 for the relay key (NOT yet trusted), else null. */
  relayCertificate: string | null
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
  const { enc, sig, alg, kid, certificate, relay_certificate: relayCertificate } = envelope as Record<string, unknown>
  if (typeof enc !== 'string' || typeof sig !== 'string' || typeof kid !== 'string' || alg !== LICENSE_ALG) return null
  if (certificate !== undefined && typeof certificate !== 'string') return null
  if (relayCertificate !== undefined && typeof relayCertificate !== 'string') return null
  const signature = strictBase64(sig)
  const payloadBytes = strictBase64(enc)
  if (!signature || signature.length !== 64 || !payloadBytes) return null
  return { enc, sig: signature, kid, certificate: certificate ?? null, relayCertificate: relayCertificate ?? null, payload: parseJson(payloadBytes) }
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

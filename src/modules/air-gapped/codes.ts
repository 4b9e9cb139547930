// The texts an air-gapped device and Keyward exchange (docs/api.md, "Air-gapped activation"). Pure
// functions (no database, no config), so the formats read here next to the docs:
//
//   KWREQ1.<base64url(JSON {v: 1, key, device_fingerprint, components?, device_name?, device_public_key, nonce, t})>
//   KWRES1.<base64url(offline license text)>
//   KWDEA1.<base64url(JSON {v: 1, license_id, activation_id, device_fingerprint, t})>.<base64url(device key's Ed25519 signature)>
//   KWRCP1.<base64url(JSON {activation_id, license_id, released_at, kid})>.<base64url(signer's signature)>[.<signer's KWCERT1>]
//
// Every part is base64url without padding; a signature covers the ASCII text before its dot
// (`KWDEA1.<payload>`), so nobody re-serialises JSON to check one.
import { createHash, createPublicKey, sign, verify, type KeyObject } from 'node:crypto'
import { parseComponents, type Components } from '../../core/component-match'
import { nestsDeeperThan } from '../../core/json-depth'

export const REQUEST_PREFIX = 'KWREQ1'
export const RESPONSE_PREFIX = 'KWRES1'
export const DEACTIVATION_PREFIX = 'KWDEA1'
export const RECEIPT_PREFIX = 'KWRCP1'
/** A request code fits one QR code. */
export const MAX_REQUEST = 2048
/** A deactivation code is ~300 characters; anything far longer is not one. */
export const MAX_DEACTIVATION = 1024
const B64URL = /^[A-Za-z0-9_-]+$/
const NONCE = /^[A-Za-z0-9_-]{16,64}$/
const FINGERPRINT = /^[0-9a-fA-F]{64}$/
/** The contract's ids (act_/lic_ + 26 Crockford characters). */
const ID = (prefix: string) => new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`)
const ACTIVATION_ID = ID('act')
const LICENSE_ID = ID('lic')
/** 1..100 characters, no control characters: validate's device_name. */
const DEVICE_NAME = /^(?:[^\u0000-\u001F\u007F-\u009F\uD800-\uDFFF\uFFFD]|[\uD800-\uDBFF][\uDC00-\uDFFF]){1,100}$/

export interface OfflineRequest {
  key: string
  /** lower-cased */
  device_fingerprint: string
  components: Components | null
  device_name: string | null
  /** raw 32 bytes, base64url */
  device_public_key: string
  nonce: string
  t: number
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; field: string; message: string }

const bad = (field: string, message: string): Parsed<never> => ({ ok: false, field, message })

/** JSON from base64url text, held to a body's depth rule; undefined for anything else (never throws). */
function jsonOf(part: string): unknown {
  if (!B64URL.test(part)) return undefined
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(part, 'base64url'))
    return nestsDeeperThan(text) ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

/** SHA-256 hex of a text as received (the request's idempotency, the deactivation's "same code"). */
export const sha256Of = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex')

/** A request code, checked field by field; the field named is `request.<name>` (or `request`). */
export function parseRequest(text: unknown): Parsed<OfflineRequest> {
  if (typeof text !== 'string' || text.length === 0) return bad('request', 'must be a KWREQ1 request code')
  if (text.length > MAX_REQUEST) return bad('request', `must be at most ${MAX_REQUEST} characters`)
  if (!text.startsWith(`${REQUEST_PREFIX}.`)) return bad('request', `must start with ${REQUEST_PREFIX}.`)
  const body = jsonOf(text.slice(REQUEST_PREFIX.length + 1))
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return bad('request', 'must be KWREQ1. and base64url of a JSON object')
  const r = body as Record<string, unknown>
  if (r.v !== 1) return bad('request.v', 'must be 1')
  if (typeof r.key !== 'string' || r.key.length < 1 || r.key.length > 256) return bad('request.key', 'must be a string of 1..256 characters')
  if (typeof r.device_fingerprint !== 'string' || !FINGERPRINT.test(r.device_fingerprint))
    return bad('request.device_fingerprint', 'must be 64 hexadecimal characters')
  const components = parseComponents(r.components)
  if (!components.ok) return bad(`request.${components.field}`, components.detail)
  if (r.device_name != null && (typeof r.device_name !== 'string' || !DEVICE_NAME.test(r.device_name)))
    return bad('request.device_name', 'must be 1..100 characters, no control characters')
  if (typeof r.device_public_key !== 'string' || rawKeyOf(r.device_public_key) === null)
    return bad('request.device_public_key', 'must be base64url (no padding) of a 32-byte Ed25519 public key')
  if (typeof r.nonce !== 'string' || !NONCE.test(r.nonce)) return bad('request.nonce', 'must be 16..64 characters of A-Z a-z 0-9 _ -')
  if (typeof r.t !== 'number' || !Number.isSafeInteger(r.t) || r.t < 0) return bad('request.t', 'must be a time in unix milliseconds')
  return {
    ok: true,
    value: {
      key: r.key,
      device_fingerprint: r.device_fingerprint.toLowerCase(),
      components: components.components,
      device_name: (r.device_name as string | null | undefined) ?? null,
      device_public_key: r.device_public_key,
      nonce: r.nonce,
      t: r.t,
    },
  }
}

/** The 32 raw bytes of a base64url Ed25519 public key written exactly (no padding, canonical), else null. */
function rawKeyOf(text: string): Buffer | null {
  if (!B64URL.test(text)) return null
  const raw = Buffer.from(text, 'base64url')
  return raw.length === 32 && raw.toString('base64url') === text ? raw : null
}

/** The device's public key as a key object; null when the bytes are not one. */
export function devicePublicKey(text: string): KeyObject | null {
  const raw = rawKeyOf(text)
  if (raw === null) return null
  try {
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' })
  } catch {
    return null
  }
}

/** The response code: the offline license text, base64url. */
export const responseCode = (license: string) => `${RESPONSE_PREFIX}.${Buffer.from(license, 'utf8').toString('base64url')}`

export interface Deactivation {
  license_id: string
  activation_id: string
  /** lower-cased */
  device_fingerprint: string
  t: number
  /** the signed text (`KWDEA1.<payload>`) and its signature, checked by `verifyDeactivation` */
  signed: string
  signature: Buffer
}

/** A deactivation code's parts, NOT yet trusted; null for anything that is not one (never throws). */
export function parseDeactivation(text: unknown): Deactivation | null {
  if (typeof text !== 'string' || text.length > MAX_DEACTIVATION) return null
  const parts = text.split('.')
  if (parts.length !== 3 || parts[0] !== DEACTIVATION_PREFIX || !B64URL.test(parts[2]!)) return null
  const signature = Buffer.from(parts[2]!, 'base64url')
  if (signature.length !== 64 || signature.toString('base64url') !== parts[2]) return null
  const body = jsonOf(parts[1]!)
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null
  const d = body as Record<string, unknown>
  if (d.v !== 1) return null
  if (typeof d.license_id !== 'string' || !LICENSE_ID.test(d.license_id)) return null
  if (typeof d.activation_id !== 'string' || !ACTIVATION_ID.test(d.activation_id)) return null
  if (typeof d.device_fingerprint !== 'string' || !FINGERPRINT.test(d.device_fingerprint)) return null
  if (typeof d.t !== 'number' || !Number.isSafeInteger(d.t) || d.t < 0) return null
  return {
    license_id: d.license_id,
    activation_id: d.activation_id,
    device_fingerprint: d.device_fingerprint.toLowerCase(),
    t: d.t,
    signed: `${parts[0]}.${parts[1]}`,
    signature,
  }
}

/** Whether the device key (base64url, as stored from its request) signed this deactivation. */
export function verifyDeactivation(deviceKey: string, d: Deactivation): boolean {
  const key = devicePublicKey(deviceKey)
  if (key === null) return false
  try {
    return verify(null, Buffer.from(d.signed, 'ascii'), key, d.signature)
  } catch {
    return false
  }
}

export interface ReceiptBody {
  activation_id: string
  license_id: string
  released_at: string
  kid: string
}

/** The receipt, signed by the account's current signer (its certificate appended when it is not the root). */
export function signReceipt(privateKey: KeyObject, certificate: string | null, r: ReceiptBody): string {
  const body = { activation_id: r.activation_id, license_id: r.license_id, released_at: r.released_at, kid: r.kid }
  const signed = `${RECEIPT_PREFIX}.${Buffer.from(JSON.stringify(body), 'utf8').toString('base64url')}`
  const signature = sign(null, Buffer.from(signed, 'ascii'), privateKey).toString('base64url')
  return certificate === null ? `${signed}.${signature}` : `${signed}.${signature}.${certificate}`
}

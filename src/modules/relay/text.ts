// The relay's texts, read and written in this one place (docs/integrating.md, "Floating seats on your
// customer's network"): the request code a relay prints (the service reads it: relays/service.ts
// readRequest), the relay license it loads, and the relay's
// certificate that travels with it.
//
//   KWRLY1.<base64url(JSON {v: 1, relay_public_key, device_fingerprint, components, name})>
//
// The relay license is an offline-license text (modules/offline/license.ts) whose payload is
// `{v: 2, kind: "relay", id, relay_id, account_id, key_id, product_id, plan, entitlements, seats,
// lease_seconds, relay_public_key, device_fingerprint, key_expires_at, issued_at, expires_at, kid}`,
// signed by the account's signer (its KWCERT1 in the envelope's `certificate` when it is not the root).
// The relay's own KWCERT1 (kid = relay_id, payload adding `scope: {relay_id, key_id, seats, expires_at}`,
// signed by the same signer) travels in the envelope's `relay_certificate` field, or beside the license
// (`relay_certificate` next to `relay_license` in a JSON answer or file): it is verified here either way,
// so nothing the envelope adds is trusted before its signature is.
import { createPublicKey, verify, type KeyObject } from 'node:crypto'
import type { Components } from '../../core/component-match'
import { REQUEST_PREFIX } from '../relays/model'
import { CERTIFICATE_PREFIX, verifyCertificate } from '../signing/certificate'
import { parseLicense, verifyLicense } from '../offline/license'

const B64URL = /^[A-Za-z0-9_-]+$/
const MAX_CERTIFICATE = 2048

export interface RelayRequest {
  v: 1
  /** base64url (no padding) of the raw 32-byte Ed25519 public key */
  relay_public_key: string
  device_fingerprint: string
  components: Components
  name: string
}

export function relayRequestCode(r: RelayRequest): string {
  const payload = { v: 1, relay_public_key: r.relay_public_key, device_fingerprint: r.device_fingerprint, components: r.components, name: r.name }
  return `${REQUEST_PREFIX}${Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')}`
}

export interface RelayScope {
  relay_id: string
  key_id: string
  seats: number
  expires_at: string
}

export interface RelayLicensePayload {
  v: 2
  kind: 'relay'
  id: string
  relay_id: string
  account_id: string
  key_id: string
  product_id: string
  plan: string | null
  entitlements: Record<string, true | number | string>
  seats: number
  lease_seconds: number
  relay_public_key: string
  device_fingerprint: string
  key_expires_at: string | null
  issued_at: string
  expires_at: string
  kid: string
}

/** A relay license whose chain verified to the pinned root. */
export interface RelayLicense {
  payload: RelayLicensePayload
  /** The license text as issued (stored as is; a renewal replaces it). */
  text: string
  /** Keyward-Certificate for the relay's answers: its KWCERT1, then the signer's when not the root. */
  chain: string
}

/** Why a license was not installed: `code` for tests and the page, `message` for the operator. */
export class RelayLicenseError extends Error {
  constructor(readonly code: 'malformed' | 'untrusted' | 'other_relay' | 'other_machine' | 'expired', message: string) {
    super(message)
  }
}

/** A raw public key (base64 or base64url of 32 bytes, or SPKI PEM) as a KeyObject; null when it is not one. */
export function publicKeyOf(text: string): KeyObject | null {
  try {
    const s = text.trim()
    if (s.startsWith('-----BEGIN PUBLIC KEY-----')) return createPublicKey(s)
    const raw = Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
    if (raw.length !== 32) return null
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' })
  } catch {
    return null
  }
}

/**
 * What a `relay load` file or a check-in answer holds: the license text, and the relay certificate when
 * it travels beside it (JSON `{relay_license, relay_certificate?}`, as POST /v1/keys/:id/relays answers).
 */
export function splitLicenseFile(text: string): { license: string; certificate: string | null } {
  const s = text.trim()
  if (s.startsWith('{')) {
    try {
      const j = JSON.parse(s) as Record<string, unknown>
      const license = typeof j.relay_license === 'string' ? j.relay_license : typeof j.license === 'string' ? j.license : null
      if (license) return { license, certificate: typeof j.relay_certificate === 'string' ? j.relay_certificate : null }
    } catch {
      // not JSON: read as a license text below, which refuses it
    }
  }
  return { license: s, certificate: null }
}

/**
 * Verifies a relay license for this relay: the signer (the root, or a key its KWCERT1 in the envelope
 * chains to the root), the license signature, the relay's certificate (signed by the same signer, for
 * this relay and key), and that it names this relay's key pair and machine. Throws RelayLicenseError.
 */
export function readRelayLicense(
  text: string,
  o: { root: KeyObject; rootKid: string; relayPublicKey: string; deviceFingerprint: string; now: number; certificate?: string | null },
): RelayLicense {
  const parsed = parseLicense(text)
  if (!parsed) throw new RelayLicenseError('malformed', 'this is not a Keyward license text')
  const p = parsed.payload as Partial<RelayLicensePayload> | null
  if (!p || typeof p !== 'object' || p.kind !== 'relay' || p.v !== 2) throw new RelayLicenseError('malformed', 'this license is not a relay license (kind "relay", v 2)')
  let signer: KeyObject
  let signerCert: string | null = null
  if (parsed.kid === o.rootKid) {
    if (parsed.certificate !== null) throw new RelayLicenseError('untrusted', 'a root-signed license carries no certificate')
    signer = o.root
  } else {
    const cert = verifyCertificate(o.root, parsed.certificate, typeof p.account_id === 'string' ? p.account_id : undefined)
    if (!cert || cert.kid !== parsed.kid) throw new RelayLicenseError('untrusted', 'the license is not signed by the pinned root or a signing key it certified')
    signer = cert.publicKey
    signerCert = parsed.certificate
  }
  if (!verifyLicense(signer, parsed) || p.kid !== parsed.kid) throw new RelayLicenseError('untrusted', 'the license signature does not verify with the pinned root')
  const payload = checkPayload(p)
  if (!sameKey(payload.relay_public_key, o.relayPublicKey)) throw new RelayLicenseError('other_relay', "this license is for another relay's key pair (made by another relay request)")
  if (payload.device_fingerprint !== o.deviceFingerprint) throw new RelayLicenseError('other_machine', 'this license is for another machine (its device_fingerprint is not this one)')
  if (Date.parse(payload.expires_at) <= o.now) throw new RelayLicenseError('expired', `this license expired at ${payload.expires_at}`)
  const envelopeCert = (() => {
    try {
      const env = JSON.parse(Buffer.from(text.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64').toString('utf8')) as Record<string, unknown>
      return typeof env.relay_certificate === 'string' ? env.relay_certificate : null
    } catch {
      return null
    }
  })()
  const relayCert = o.certificate ?? envelopeCert
  if (!relayCert) throw new RelayLicenseError('malformed', "the relay's certificate (relay_certificate) is missing")
  const scope = verifyRelayCertificate(signer, relayCert)
  if (!scope || scope.kid !== payload.relay_id || !sameKey(scope.public_key, payload.relay_public_key) ||
    scope.scope.relay_id !== payload.relay_id || scope.scope.key_id !== payload.key_id || scope.scope.seats !== payload.seats || scope.account_id !== payload.account_id) {
    throw new RelayLicenseError('untrusted', "the relay's certificate does not match the license or is not signed by its signer")
  }
  return { payload, text: text.trim() + '\n', chain: signerCert === null ? relayCert : `${relayCert} ${signerCert}` }
}

/** The raw bytes of a key written in standard base64 or base64url (the license uses the one, the request code the other). */
const rawKey = (s: string) => (typeof s === 'string' && /^[A-Za-z0-9+/_-]{43}=?$/.test(s) ? Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64') : null)
const sameKey = (a: string, b: string) => {
  const x = rawKey(a)
  const y = rawKey(b)
  return x !== null && y !== null && x.length === 32 && x.equals(y)
}

function checkPayload(p: Partial<RelayLicensePayload>): RelayLicensePayload {
  const bad = (field: string) => new RelayLicenseError('malformed', `the license's ${field} is missing or malformed`)
  for (const f of ['id', 'relay_id', 'account_id', 'key_id', 'product_id', 'relay_public_key', 'device_fingerprint', 'issued_at', 'expires_at', 'kid'] as const) {
    if (typeof p[f] !== 'string') throw bad(f)
  }
  if (!Number.isInteger(p.seats) || p.seats! < 1) throw bad('seats')
  if (!Number.isInteger(p.lease_seconds) || p.lease_seconds! < 1) throw bad('lease_seconds')
  if (!Number.isFinite(Date.parse(p.expires_at!))) throw bad('expires_at')
  if (p.key_expires_at != null && !Number.isFinite(Date.parse(p.key_expires_at))) throw bad('key_expires_at')
  if (p.entitlements != null && (typeof p.entitlements !== 'object' || Array.isArray(p.entitlements))) throw bad('entitlements')
  return { ...(p as RelayLicensePayload), plan: p.plan ?? null, entitlements: p.entitlements ?? {}, key_expires_at: p.key_expires_at ?? null }
}

export interface RelayCertificate {
  kid: string
  public_key: string
  account_id: string
  created_at: string
  scope: RelayScope
}

/** The relay certificate's content when `signer` signed it; null otherwise (never throws). */
export function verifyRelayCertificate(signer: KeyObject, text: string): RelayCertificate | null {
  if (text.length > MAX_CERTIFICATE) return null
  const parts = text.split('.')
  if (parts.length !== 3 || parts[0] !== CERTIFICATE_PREFIX || !B64URL.test(parts[1]!) || !B64URL.test(parts[2]!)) return null
  try {
    const sig = Buffer.from(parts[2]!, 'base64url')
    if (sig.length !== 64 || !verify(null, Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'), signer, sig)) return null
    const c = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as RelayCertificate
    const s = c.scope
    if (typeof c.kid !== 'string' || typeof c.public_key !== 'string' || typeof c.account_id !== 'string' || !s || typeof s !== 'object') return null
    if (typeof s.relay_id !== 'string' || typeof s.key_id !== 'string' || !Number.isInteger(s.seats) || typeof s.expires_at !== 'string') return null
    return c
  } catch {
    return null
  }
}

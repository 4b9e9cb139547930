// Offline licenses (docs/api.md, "Offline licenses"): the text is BEGIN/END lines around standard base64
// (wrapping allowed) of {"enc", "sig", "alg": "base64+ed25519", "kid", "certificate"?}; the signature is
// Ed25519 over "license/" + enc, enc exactly as transmitted; enc decodes to the payload. A v2 payload
// carries its signer's kid inside the signed bytes (so the outer kid cannot be relabelled) and, when
// the signer is not the root, the envelope carries the signer's KWCERT1 certificate: the pinned root
// alone verifies it, offline. A v1 payload (no kid inside) verifies with the root only. A verifier also
// checks the device, the expiry against its clock, and that issued_at is not more than 5 minutes in the
// clock's future.
import { CLOCK_SKEW_MS } from './clock.js'
import { fromBase64, utf8 } from './encoding.js'
import { KeywardError } from './errors.js'
import { entitlementsOf, withLookup, type EntitlementLookup, type Entitlements, type EntitlementValue } from './answers.js'
import type { Reach } from './signing-keys.js'
import { componentsMatch, isComponentMatch, parseComponents, type ComponentMatch, type Components } from './component-match.js'
import type { VerifyKey } from './signature.js'

const BEGIN = '-----BEGIN KEYWARD LICENSE-----'
const END = '-----END KEYWARD LICENSE-----'
const MAX_TEXT = 16 * 1024

export interface LicensePayload {
  /** 1: signed by the root, no kid inside; 2: `kid` names the signer (the root or a signing key). */
  v: 1 | 2
  /** The signer's kid (v2). */
  kid?: string
  id: string
  account_id: string
  key_id: string
  product_id: string
  plan: string | null
  device_fingerprint: string
  issued_at: string
  expires_at: string
  /** The key's effective entitlements when the license was issued or renewed (absent from licenses issued before entitlements existed). */
  entitlements?: Record<string, EntitlementValue>
  /** The device's components when the license was issued (`{name: hash}`), if it sent any. */
  components?: Record<string, string> | null
  /** The key's rule (docs/integrating.md, "Identifying machines"): not `off` → the device's current components must match `components`. */
  component_match?: ComponentMatch
}

export type LicenseRefusal = 'malformed' | 'bad_signature' | 'signing_key_revoked' | 'wrong_device' | 'device_mismatch' | 'wrong_product' | 'expired' | 'clock_set_back'

/** `has(code)` / `entitlement(code)` read the license's entitlements (none on a refused license). */
export type LicenseResult = EntitlementLookup &
  (
    | { valid: true; license: LicensePayload; expiresAt: Date; issuedAt: Date; entitlements: Entitlements }
    | { valid: false; reason: LicenseRefusal; license?: LicensePayload }
  )

const decodeJson = (bytes: Uint8Array | null): unknown => {
  if (!bytes) return null
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch {
    return null
  }
}

const isPayload = (p: any): p is LicensePayload =>
  !!p && typeof p === 'object' && (p.v === 1 || (p.v === 2 && typeof p.kid === 'string')) && (p.account_id === undefined || typeof p.account_id === 'string') && typeof p.id === 'string' && typeof p.product_id === 'string' &&
  typeof p.device_fingerprint === 'string' && typeof p.issued_at === 'string' && typeof p.expires_at === 'string' &&
  Number.isFinite(Date.parse(p.issued_at)) && Number.isFinite(Date.parse(p.expires_at)) &&
  (p.entitlements === undefined || (!!p.entitlements && typeof p.entitlements === 'object' && !Array.isArray(p.entitlements))) &&
  (p.component_match === undefined || isComponentMatch(p.component_match)) && parseComponents(p.components).ok

export interface LicenseChecks {
  /** The pinned root's kid: a v1 license must be signed by it. */
  rootKid: string
  /** The signer's key (signing-keys.ts Trust.keyFor): throws a TrustFailure (`revoked` set for a revoked key). */
  keyFor: (kid: string, certificate: string | null, reach: Reach, accountId?: string) => Promise<VerifyKey>
  fingerprint: string
  /** The device's current components (machineIdentity()), or null when the app sends none. */
  components?: Components | null
  productId?: string
  /** The clock to trust: the caller passes max(local clock, latest time seen). */
  now: number
  /** The local clock itself, for the "issued in the future" check. */
  clock: number
}

export async function checkLicense(text: unknown, c: LicenseChecks): Promise<LicenseResult> {
  const result = await check(text, c)
  return withLookup(result, result.valid ? result.entitlements : entitlementsOf(null))
}

type Checked = { valid: true; license: LicensePayload; expiresAt: Date; issuedAt: Date; entitlements: Entitlements } | { valid: false; reason: LicenseRefusal; license?: LicensePayload }

async function check(text: unknown, c: LicenseChecks): Promise<Checked> {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return { valid: false, reason: 'malformed' }
  const trimmed = text.trim()
  if (!trimmed.startsWith(BEGIN) || !trimmed.endsWith(END)) return { valid: false, reason: 'malformed' }
  const envelope = decodeJson(fromBase64(trimmed.slice(BEGIN.length, trimmed.length - END.length).replace(/\s+/g, ''))) as any
  if (!envelope || typeof envelope !== 'object' || envelope.alg !== 'base64+ed25519') return { valid: false, reason: 'malformed' }
  const { enc, sig, certificate } = envelope
  const signature = typeof sig === 'string' ? fromBase64(sig) : null
  const payloadBytes = typeof enc === 'string' ? fromBase64(enc) : null
  if (!signature || signature.length !== 64 || !payloadBytes || (certificate !== undefined && typeof certificate !== 'string')) return { valid: false, reason: 'malformed' }
  // The payload is read before its signature only to learn which key must have signed it; nothing in
  // it is believed until the signature by that key (the kid inside included) verifies.
  const license = decodeJson(payloadBytes)
  if (!isPayload(license)) {
    // Unreadable: a genuine root-signed text of an unknown shape is malformed, anything else a forgery.
    const root = await c.keyFor(c.rootKid, null, 'offline').catch(() => null)
    return { valid: false, reason: root && (await verifies(root, signature, enc)) ? 'malformed' : 'bad_signature' }
  }
  // v1 predates signing keys: only the root signed them. v2 names its signer inside the signed bytes.
  const kid = license.v === 1 ? c.rootKid : license.kid!
  if (typeof envelope.kid === 'string' && envelope.kid !== kid) return { valid: false, reason: 'bad_signature' }
  let key: VerifyKey
  try {
    // An unknown kid may refresh the key set when the network is there; offline the certificate suffices.
    key = await c.keyFor(kid, license.v === 1 ? null : (certificate ?? null), 'online', license.account_id)
  } catch (err) {
    if (err instanceof KeywardError) throw err // the pinned root itself is unusable: a setup error, not a forgery
    return { valid: false, reason: (err as { revoked?: boolean }).revoked ? 'signing_key_revoked' : 'bad_signature' }
  }
  if (!(await verifies(key, signature, enc))) return { valid: false, reason: 'bad_signature' }
  const issuedAt = new Date(license.issued_at)
  const expiresAt = new Date(license.expires_at)
  if (license.device_fingerprint.toLowerCase() !== c.fingerprint.toLowerCase()) return { valid: false, reason: 'wrong_device', license }
  // The rule on: a copy of this device (a cloned image keeps the fingerprint and the license file) must
  // also show the components the license was issued to, as validate would ask (docs/integrating.md, "Identifying machines").
  // A license issued without components has nothing to compare: the fingerprint alone decides, as before.
  const rule = license.component_match ?? 'off'
  if (rule !== 'off' && license.components && !componentsMatch(rule, license.components, c.components ?? null)) {
    return { valid: false, reason: 'device_mismatch', license }
  }
  if (c.productId && license.product_id !== c.productId) return { valid: false, reason: 'wrong_product', license }
  if (issuedAt.getTime() > c.clock + CLOCK_SKEW_MS || c.now > c.clock + CLOCK_SKEW_MS) return { valid: false, reason: 'clock_set_back', license }
  if (expiresAt.getTime() <= c.now) return { valid: false, reason: 'expired', license }
  return { valid: true, license, expiresAt, issuedAt, entitlements: entitlementsOf(license.entitlements) }
}

async function verifies(key: VerifyKey, signature: Uint8Array, enc: string): Promise<boolean> {
  try {
    return await crypto.subtle.verify({ name: 'Ed25519' }, key as CryptoKey, signature as BufferSource, utf8(`license/${enc}`) as BufferSource)
  } catch {
    return false
  }
}

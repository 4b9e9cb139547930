// Signed answers (Keyward-Signature), format v3: written once in the repository's docs/api.md ("Signed
// answers"), which the server's signing code points to as well. In short: the service signs, with the
// account's current signer (its root, or a signing key the root certified), "keyward-answer/v3\n" + kid
// + "\n" + path + "\n" + nonce + "\n" + t + "\n" + request_sha256 + "\n" + <the exact response body
// bytes>, where request_sha256 is the lowercase hex SHA-256 of the exact request body bytes it received,
// and sends `Keyward-Certificate` (the signer's KWCERT1) when the signer is not the root. The kid is
// inside the signed bytes, so a signature cannot be relabelled as another key's. The client knows the
// path, the nonce and the bytes it sent, so a valid signature proves the answer is this account's, for
// this very request (key, device and every other field), and (with t near the local clock) fresh.
// Nothing here trusts the body before the signature is checked.
import { CLOCK_SKEW_MS } from './clock.js'
import { ClockSkewError, KeywardError, RevokedSignerError, SignatureError } from './errors.js'
import { fromBase64, sha256, toHex, utf8, utf8Then } from './encoding.js'

export const ANSWER_PREFIX = 'keyward-answer/v3\n'

/** The imported public key: a WebCrypto CryptoKey, typed opaquely so the package's types need no DOM lib. */
export type VerifyKey = object

/** Imports an Ed25519 public key: raw 32 bytes in standard base64 (`public_key`), or SPKI PEM (`public_key_pem`). */
export async function importPublicKey(publicKey: string | Uint8Array, extractable = false): Promise<VerifyKey> {
  try {
    if (typeof publicKey !== 'string') return await crypto.subtle.importKey('raw', publicKey as BufferSource, { name: 'Ed25519' }, extractable, ['verify'])
    const text = publicKey.trim()
    if (text.startsWith('-----BEGIN PUBLIC KEY-----')) {
      const der = fromBase64(text.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, '').replace(/\s+/g, ''))
      if (der) return await crypto.subtle.importKey('spki', der as BufferSource, { name: 'Ed25519' }, extractable, ['verify'])
    } else {
      const raw = fromBase64(text)
      if (raw?.length === 32) return await crypto.subtle.importKey('raw', raw as BufferSource, { name: 'Ed25519' }, extractable, ['verify'])
    }
  } catch (cause) {
    throw new KeywardError({ code: 'invalid_public_key', detail: 'rootPublicKey could not be imported as an Ed25519 key', cause })
  }
  throw new KeywardError({ code: 'invalid_public_key', detail: 'rootPublicKey must be the raw 32-byte key in base64 or an SPKI PEM' })
}

export interface SignatureHeader {
  alg: string
  kid: string
  t: number
  sig: Uint8Array
}

/** Parses `alg=ed25519, kid=..., t=..., sig=...`; null when any part is missing or malformed. */
export function parseSignatureHeader(header: string | null): SignatureHeader | null {
  if (!header || header.length > 1024) return null
  const parts = new Map<string, string>()
  for (const item of header.split(',')) {
    const at = item.indexOf('=')
    if (at < 0) return null
    parts.set(item.slice(0, at).trim().toLowerCase(), item.slice(at + 1).trim())
  }
  const alg = parts.get('alg')
  const kid = parts.get('kid') ?? ''
  const t = parts.get('t')
  const sig = fromBase64(parts.get('sig') ?? '')
  if (alg !== 'ed25519' || !/^[A-Za-z0-9_-]{1,64}$/.test(kid) || !t || !/^\d{1,16}$/.test(t) || !sig || sig.length !== 64) return null
  return { alg, kid, t: Number(t), sig }
}

/** The signed record of one answer: enough to verify it again later (the stored grace answer). */
export interface SignedAnswer {
  path: string
  nonce: string
  t: number
  kid: string
  /** Standard base64 of the signature. */
  sig: string
  /** The signer's KWCERT1 certificate (`Keyward-Certificate`), absent when the root signed. */
  certificate?: string
  /** The request body exactly as sent (its SHA-256 is signed: the answer is bound to it). */
  request: string
  /** The body exactly as received (the signature covers its bytes; stored as text it is the same UTF-8). */
  body: string
}

/** Lowercase hex SHA-256 of the request body text as sent (UTF-8). */
export const requestDigest = async (request: string) => toHex(await sha256(request))

export function signedMessage(kid: string, path: string, nonce: string, t: number, requestSha256: string, body: Uint8Array): Uint8Array {
  return utf8Then(`${ANSWER_PREFIX}${kid}\n${path}\n${nonce}\n${t}\n${requestSha256}\n`, body)
}

/**
 * Finds the key that must have signed for a kid (the pinned root, or a key it certified): see
 * signing-keys.ts. Throws TrustFailure when nothing trustworthy vouches for it or it was revoked.
 */
export type KeyResolver = (kid: string, certificate: string | null) => Promise<VerifyKey>

/** What one HTTP answer is checked against: the request the client sent and the answer's bytes. */
export interface AnswerToVerify {
  header: string | null
  /** The `Keyward-Certificate` header, if any. */
  certificate: string | null
  path: string
  nonce: string
  /** Hex SHA-256 of the request body sent. */
  requestSha256: string
  body: Uint8Array
  status: number
  now: number
  requestId: string | null
  /** False for an answer whose time does not matter (a 5xx: unavailable either way; the nonce already proves it fresh). */
  checkTime?: boolean
}

/**
 * Verifies one HTTP answer: the header parses, its kid resolves to a key the root vouches for (else
 * SignatureError, RevokedSignerError for a revoked signing key), and the signature covers this kid,
 * this path, this nonce, this request and these body bytes (else SignatureError); then `t` is within CLOCK_SKEW_MS of `now` (else
 * ClockSkewError: the answer is genuine, the device's clock is off).
 */
export async function verifyAnswer(resolve: KeyResolver, a: AnswerToVerify): Promise<SignatureHeader> {
  const parsed = parseSignatureHeader(a.header)
  const what = `a ${a.status} answer`
  if (!parsed) throw new SignatureError(a.header ? `${what} with a malformed Keyward-Signature header` : `${what} that is not signed`, a.requestId, a.status)
  let key: VerifyKey
  try {
    key = await resolve(parsed.kid, a.certificate)
  } catch (err) {
    if (err instanceof KeywardError) throw err
    const detail = `${what} ${err instanceof Error ? err.message : String(err)}`
    if ((err as { revoked?: boolean }).revoked) throw new RevokedSignerError(parsed.kid, detail, a.requestId, a.status)
    throw new SignatureError(detail, a.requestId, a.status)
  }
  const message = signedMessage(parsed.kid, a.path, a.nonce, parsed.t, a.requestSha256, a.body)
  const genuine = await crypto.subtle.verify({ name: 'Ed25519' }, key as CryptoKey, parsed.sig as BufferSource, message as BufferSource)
  if (!genuine) throw new SignatureError(`${what} whose signature does not match it, this request and the public key`, a.requestId, a.status)
  if (a.checkTime !== false && Math.abs(a.now - parsed.t) > CLOCK_SKEW_MS) throw new ClockSkewError(a.now - parsed.t, a.requestId)
  return parsed
}

/** Re-verifies a stored answer (its signature over the stored request and body; the caller applies its own age rules). */
export async function verifyStored(resolve: KeyResolver, answer: SignedAnswer): Promise<boolean> {
  const sig = typeof answer.sig === 'string' ? fromBase64(answer.sig) : null
  if (!sig || sig.length !== 64 || typeof answer.request !== 'string' || typeof answer.body !== 'string' || typeof answer.kid !== 'string') return false
  try {
    // Stored before the signer was revoked, or by a key nobody vouches for: it stands in for nothing.
    const key = await resolve(answer.kid, typeof answer.certificate === 'string' ? answer.certificate : null)
    const message = signedMessage(answer.kid, answer.path, answer.nonce, answer.t, await requestDigest(answer.request), utf8(answer.body))
    return await crypto.subtle.verify({ name: 'Ed25519' }, key as CryptoKey, sig as BufferSource, message as BufferSource)
  } catch {
    return false
  }
}

// Signed answers (Keyward-Signature). The service signs, with the account's Ed25519 key, the UTF-8 of
//   "keyward-answer/v1\n" + path + "\n" + nonce + "\n" + t + "\n" + <the exact response body bytes>
// and sends `Keyward-Signature: alg=ed25519, kid=<kid>, t=<unix ms>, sig=<base64>`. The client sent the
// nonce and knows the path, so a valid signature proves the answer is this account's, for this request,
// and (with t near the local clock) fresh. Nothing here trusts the body before the signature is checked.
import { KeywardError, SignatureError } from './errors.js'
import { fromBase64, utf8, utf8Then } from './encoding.js'

export const ANSWER_PREFIX = 'keyward-answer/v1\n'
/** How far `t` may be from the local clock, either way. */
export const MAX_SKEW_MS = 5 * 60_000

/** Imports the account's public key: raw 32 bytes in standard base64 (`public_key`), or SPKI PEM (`public_key_pem`). */
export async function importPublicKey(publicKey: string | Uint8Array): Promise<CryptoKey> {
  try {
    if (typeof publicKey !== 'string') return await crypto.subtle.importKey('raw', publicKey as BufferSource, { name: 'Ed25519' }, false, ['verify'])
    const text = publicKey.trim()
    if (text.startsWith('-----BEGIN PUBLIC KEY-----')) {
      const der = fromBase64(text.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, '').replace(/\s+/g, ''))
      if (der) return await crypto.subtle.importKey('spki', der as BufferSource, { name: 'Ed25519' }, false, ['verify'])
    } else {
      const raw = fromBase64(text)
      if (raw?.length === 32) return await crypto.subtle.importKey('raw', raw as BufferSource, { name: 'Ed25519' }, false, ['verify'])
    }
  } catch (cause) {
    throw new KeywardError({ code: 'invalid_public_key', detail: 'publicKey could not be imported as an Ed25519 key', cause })
  }
  throw new KeywardError({ code: 'invalid_public_key', detail: 'publicKey must be the raw 32-byte key in base64 or an SPKI PEM' })
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
  if (alg !== 'ed25519' || !t || !/^\d{1,16}$/.test(t) || !sig || sig.length !== 64) return null
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
  /** The body exactly as received (the signature covers its bytes; stored as text it is the same UTF-8). */
  body: string
}

export function signedMessage(path: string, nonce: string, t: number, body: Uint8Array): Uint8Array {
  return utf8Then(`${ANSWER_PREFIX}${path}\n${nonce}\n${t}\n`, body)
}

/**
 * Verifies one HTTP answer: the header parses, the signature covers this path, this nonce and these
 * body bytes, and `t` is within ±5 minutes of `now`. Throws SignatureError otherwise.
 */
export async function verifyAnswer(
  key: CryptoKey,
  header: string | null,
  path: string,
  nonce: string,
  body: Uint8Array,
  now: number,
  requestId: string | null,
): Promise<SignatureHeader> {
  const parsed = parseSignatureHeader(header)
  if (!parsed) throw new SignatureError(header ? 'malformed Keyward-Signature header' : 'the answer is not signed', requestId)
  const genuine = await crypto.subtle.verify({ name: 'Ed25519' }, key, parsed.sig as BufferSource, signedMessage(path, nonce, parsed.t, body) as BufferSource)
  if (!genuine) throw new SignatureError('the signature does not match this answer, request and public key', requestId)
  if (Math.abs(now - parsed.t) > MAX_SKEW_MS) throw new SignatureError('the signed time is more than 5 minutes from the local clock', requestId)
  return parsed
}

/** Re-verifies a stored answer (its signature only; the caller applies its own age rules). */
export async function verifyStored(key: CryptoKey, answer: SignedAnswer): Promise<boolean> {
  const sig = fromBase64(answer.sig)
  if (!sig || sig.length !== 64) return false
  try {
    return await crypto.subtle.verify({ name: 'Ed25519' }, key, sig as BufferSource, signedMessage(answer.path, answer.nonce, answer.t, utf8(answer.body)) as BufferSource)
  } catch {
    return false
  }
}

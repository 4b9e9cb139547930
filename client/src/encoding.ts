// Base64, hex and SHA-256 with nothing but the web platform (atob/btoa, TextEncoder, WebCrypto), so the
// package runs unchanged in Node, Bun, Deno, browsers and Workers.

const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard base64 with padding (RFC 4648 §4); null for anything else. */
export function fromBase64(text: string): Uint8Array | null {
  if (!STRICT_BASE64.test(text)) return null
  const bin = atob(text)
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return out
}

/**
 * Base64 of either alphabet, padded or not (RFC 4648 §4 or §5): the `KW*` texts carry base64url without
 * padding, JSON objects standard base64; a verifier reads both the same. Null for anything else.
 */
export function fromBase64Loose(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(text)) return null
  const bare = text.replace(/=+$/, '').replace(/-/g, '+').replace(/_/g, '/')
  if (bare.length % 4 === 1) return null
  return fromBase64(bare + '='.repeat((4 - (bare.length % 4)) % 4))
}

export function toBase64Url(bytes: Uint8Array): string {
  let bin = ''
  for (const b of bytes) bin += String.fromCharCode(b)
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

export const toHex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')

const ENCODER = new TextEncoder()
/** Keeps a leading BOM as text, so decoding and re-encoding gives back the same bytes (stored answers). */
const DECODER = new TextDecoder('utf-8', { ignoreBOM: true })

export const utf8 = (text: string) => ENCODER.encode(text)

export const fromUtf8 = (bytes: Uint8Array) => DECODER.decode(bytes)

/** `head` as UTF-8 followed by `tail`, in one allocation. */
export function utf8Then(head: string, tail: Uint8Array): Uint8Array {
  const out = new Uint8Array(head.length * 3 + tail.length)
  const { written } = ENCODER.encodeInto(head, out)
  out.set(tail, written)
  return out.subarray(0, written + tail.length)
}

export async function sha256(text: string): Promise<Uint8Array> {
  return sha256Bytes(utf8(text))
}

export async function sha256Bytes(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as BufferSource))
}

export function randomBytes(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n))
}

/** JSON of an answer's text (a leading BOM allowed); null when it is not JSON. */
export function parseJsonText(text: string): any {
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
  } catch {
    return null
  }
}

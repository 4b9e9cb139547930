// What an app holding only its account's pinned root does with a signed answer, a license and the key
// set (docs/api.md, "Signing keys"): node:crypto alone and the RFC 8785 package, never the service's
// own code, so the tests prove the formats verify as documented.
import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto'
import canonicalize from 'canonicalize'

export const rootKeyOf = (publicKeyRaw: string): KeyObject =>
  createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKeyRaw, 'base64').toString('base64url') }, format: 'jwk' })

export const kidOfRaw = (publicKeyRaw: string) => createHash('sha256').update(Buffer.from(publicKeyRaw, 'base64')).digest('hex').slice(0, 32)

/** The key a KWCERT1 vouches for, when `root` signed it for `accountId`; null otherwise. */
export function certifiedKey(root: KeyObject, certificate: string, accountId: string): { kid: string; publicKey: KeyObject; created_at: string } | null {
  const [prefix, payload, sig] = certificate.split('.')
  if (prefix !== 'KWCERT1' || !payload || !sig) return null
  if (!verify(null, Buffer.from(`KWCERT1.${payload}`, 'ascii'), root, Buffer.from(sig, 'base64url'))) return null
  const c = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
  if (Object.keys(c).join(',') !== 'kid,public_key,account_id,created_at') return null
  if (c.kid !== kidOfRaw(c.public_key) || c.account_id !== accountId) return null
  return { kid: c.kid, publicKey: rootKeyOf(c.public_key), created_at: c.created_at }
}

/** Whether the key set's signature is the root's over the canonical JSON of the rest. */
export function keySetVerifies(root: KeyObject, set: Record<string, unknown>): boolean {
  const { signature, ...rest } = set
  return verify(null, Buffer.from(canonicalize(rest)!, 'utf8'), root, Buffer.from(String(signature), 'base64url'))
}

export const signatureParts = (header: string | null) =>
  Object.fromEntries((header ?? '').split(', ').map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)])) as Record<string, string>

/**
 * The kid that signed an answer, when it verifies with the root alone (following Keyward-Certificate when
 * the signer is not the root); null when it does not verify.
 */
export function answerSigner(
  o: { root: KeyObject; rootKid: string; accountId: string },
  headers: Headers,
  path: string,
  nonce: string,
  sent: string | Uint8Array,
  body: Uint8Array,
): string | null {
  const s = signatureParts(headers.get('keyward-signature'))
  if (s.alg !== 'ed25519' || !s.kid || !s.t || !s.sig) return null
  const certificate = headers.get('keyward-certificate')
  let key = o.root
  if (s.kid !== o.rootKid) {
    const certified = certificate === null ? null : certifiedKey(o.root, certificate, o.accountId)
    if (certified === null || certified.kid !== s.kid) return null
    key = certified.publicKey
  } else if (certificate !== null) return null
  const digest = createHash('sha256').update(sent).digest('hex')
  const message = Buffer.concat([Buffer.from(`keyward-answer/v3\n${s.kid}\n${path}\n${nonce}\n${s.t}\n${digest}\n`, 'utf8'), body])
  return verify(null, message, key, Buffer.from(s.sig, 'base64')) ? s.kid : null
}

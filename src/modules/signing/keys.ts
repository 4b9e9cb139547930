// Ed25519 key pairs and their ids: the root's and the signing keys' alike (docs/api.md, "Signing keys").
// Pure functions (no database, no config).
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto'

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

/** Key id: derived from the public key itself (first 32 hex of its SHA-256), so it is stable and names exactly one key. */
export const kidOf = (publicKey: KeyObject) => kidOfRaw(rawPublicKey(publicKey))

/** The same from the raw 32 bytes (a certificate carries them as base64). */
export const kidOfRaw = (raw: Uint8Array) => createHash('sha256').update(raw).digest('hex').slice(0, 32)

export function generateKeyPair(): GeneratedKeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  return {
    kid: kidOf(publicKey),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    privateKeyPkcs8: privateKey.export({ format: 'der', type: 'pkcs8' }),
  }
}

// The signed key set (GET /v1/signing-keys and GET /v1/offline/keys, docs/api.md "The key set"): the
// root signs the RFC 8785 canonical JSON (the `canonicalize` package) of the object without
// `signature`, so an app holding only the pinned root learns every key, revocations included.
import { sign, verify, type KeyObject } from 'node:crypto'
import canonicalize from 'canonicalize'
import type { KeySet } from './model'

export type UnsignedKeySet = Omit<KeySet, 'signature'>

export const keySetBytes = (set: UnsignedKeySet): Buffer => Buffer.from(canonicalize({ root: set.root, keys: set.keys, issued_at: set.issued_at })!, 'utf8')

export function signKeySet(root: KeyObject, set: UnsignedKeySet): KeySet {
  return { root: set.root, keys: set.keys, issued_at: set.issued_at, signature: sign(null, keySetBytes(set), root).toString('base64url') }
}

/** Whether `set` is signed by `root` (the key set exactly as received, parsed). */
export function verifyKeySet(root: KeyObject, set: KeySet): boolean {
  try {
    return verify(null, keySetBytes(set), root, Buffer.from(set.signature, 'base64url'))
  } catch {
    return false
  }
}

// Per-account Ed25519 signing keys. Created with the account (same transaction) or, for accounts
// that predate offline licenses, on first use. The private key exists in plaintext only in memory.
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto'
import { open, seal } from '../../infra/crypto'
import type { AnswerKeys } from '../../http/client-answers'
import type { Sql, Tx } from '../../infra/db'
import { generateKeyPair, rawPublicKey } from './license'
import * as repo from './repo'

export interface Signer {
  kid: string
  publicKeyPem: string
  /** Raw 32-byte public key, base64. */
  publicKeyRaw: string
  publicKey: KeyObject
  privateKey: KeyObject
}

/** Generates and stores a key pair for the account unless it has one; safe to race. */
export async function createSigningKey(sql: Sql | Tx, accountId: string, secretKey: Uint8Array): Promise<void> {
  const pair = generateKeyPair()
  await repo.insertSigningKey(sql, {
    accountId,
    kid: pair.kid,
    publicKeyPem: pair.publicKeyPem,
    privateKeySealed: seal(secretKey, pair.privateKeyPkcs8),
  })
}

// Key pairs never change once stored, so a node may keep them for its lifetime; the bound only
// stops a node that serves a very large number of accounts from growing without limit.
const MAX_CACHED = 10_000

/**
 * The node's cache of unsealed signing keys, loading (and lazily creating) them on demand. One per
 * node (app.ts): offline licenses and signed answers (http/client-answers.ts) share it.
 */
export class Signers implements AnswerKeys {
  private cache = new Map<string, Promise<Signer>>()
  /** The loaded ones, so that a signed answer awaits nothing once its account's key is in memory. */
  private loaded = new Map<string, Signer>()

  constructor(
    private sql: Sql,
    private secretKey: Uint8Array,
  ) {}

  get(accountId: string): Promise<Signer> {
    let signer = this.cache.get(accountId)
    if (!signer) {
      if (this.cache.size >= MAX_CACHED) {
        this.cache.clear()
        this.loaded.clear()
      }
      const loading = this.load(accountId)
      signer = loading
      this.cache.set(accountId, loading)
      loading.then(
        (s) => {
          if (this.cache.get(accountId) === loading) this.loaded.set(accountId, s)
        },
        // a failed load (database down) must not stay cached
        () => this.cache.delete(accountId),
      )
    }
    return signer
  }

  /** The account's key: synchronous once loaded (the signed validate answer relies on it). */
  keyFor(accountId: string): Signer | Promise<Signer> {
    return this.loaded.get(accountId) ?? this.get(accountId)
  }

  private async load(accountId: string): Promise<Signer> {
    let row = await repo.findSigningKey(this.sql, accountId)
    if (!row) {
      await createSigningKey(this.sql, accountId, this.secretKey)
      row = (await repo.findSigningKey(this.sql, accountId))!
    }
    const publicKey = createPublicKey(row.public_key_pem)
    return {
      kid: row.kid,
      publicKeyPem: row.public_key_pem,
      publicKeyRaw: rawPublicKey(publicKey).toString('base64'),
      publicKey,
      privateKey: createPrivateKey({ key: open(this.secretKey, row.private_key_sealed), format: 'der', type: 'pkcs8' }),
    }
  }
}

// The node's cache of each account's signers: its root key (created with the account, or on first use
// for accounts that predate offline licenses) and its signing keys, unsealed in memory only. It answers
// "which key signs for this account now" synchronously once loaded (the signed validate answer relies
// on it), computing it from the held rows on this node's own clock (timeline.ts), so a scheduled
// activation switches every node at its time with no message.
//
// Freshness and outages follow the shared read-through rules (infra/read-through-cache.ts) exactly as
// the key hot state: an activate or revoke publishes `{kind: 'signers'}` after its commit and waits for
// every node (modules/signing/service.ts); a node that cannot prove it has every change (Bus.trusted
// false) keeps its entry only for the degraded TTL, which every writer waits out, so no node signs with
// a key that a returned activate or revoke replaced.
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto'
import type { AnswerKey, AnswerKeys } from '../../http/client-answers'
import type { Bus } from '../../infra/bus'
import { open, seal } from '../../infra/crypto'
import type { Sql, Tx } from '../../infra/db'
import { FRESH, ReadThroughCache } from '../../infra/read-through-cache'
import { generateKeyPair, rawPublicKey } from './keys'
import * as repo from './repo'
import { takesOverAt } from './timeline'

export interface Signer extends AnswerKey {
  readonly kid: string
  readonly publicKeyPem: string
  /** Raw 32-byte public key, base64. */
  readonly publicKeyRaw: string
  readonly publicKey: KeyObject
  readonly privateKey: KeyObject
  /** The KWCERT1 text; null for the root itself. */
  readonly certificate: string | null
}

/** What a node holds for one account. */
export interface AccountSigners {
  readonly loadedAt: number
  readonly root: Signer
  /** The keys that sign from a time on (the active one, the scheduled ones), by that time ascending. */
  readonly switches: readonly { readonly at: number; readonly signer: Signer }[]
  /** Every key of the account by kid, the root and revoked ones included (sync reads a license's signer). */
  readonly publicKeys: ReadonlyMap<string, { publicKey: KeyObject; revoked: boolean }>
}

/** The signer at `now` (ms): the latest switch at or before it, else the root. No allocation. */
export function signerAt(held: AccountSigners, now: number): Signer {
  const switches = held.switches
  for (let i = switches.length - 1; i >= 0; i--) if (switches[i]!.at <= now) return switches[i]!.signer
  return held.root
}

/** Generates and stores a root key pair for the account unless it has one; safe to race. */
export async function createRootKey(sql: Sql | Tx, accountId: string, secretKey: Uint8Array): Promise<void> {
  const pair = generateKeyPair()
  await repo.insertRootKey(sql, {
    accountId,
    kid: pair.kid,
    publicKeyPem: pair.publicKeyPem,
    privateKeySealed: seal(secretKey, pair.privateKeyPkcs8),
  })
}

// Accounts a node holds at most: the bound only stops a node that serves a very large number of
// accounts from growing without limit.
const MAX_CACHED = 10_000

class SignerCache extends ReadThroughCache<AccountSigners> {
  private held = new Map<string, AccountSigners>()
  /** Unsealed keys by kid: a key pair never changes once stored, so a re-read does not unseal again. */
  private unsealed = new Map<string, Signer>()

  constructor(
    private sql: Sql,
    private secretKey: Uint8Array,
    rules: { ttlMs: number; degradedTtlMs: number; trusted?: (now: number) => boolean },
  ) {
    super(rules)
  }

  /** A fresh entry answers here (the shared rule, no virtual lookup); anything else takes the shared path. */
  override get(accountId: string, now = Date.now()): AccountSigners | null | Promise<AccountSigners | null> {
    const entry = this.held.get(accountId)
    if (entry !== undefined && this.freshness.check(entry.loadedAt, now) === FRESH) return entry
    return super.get(accountId, now)
  }

  private signer(kid: string, pem: string, sealed: string, certificate: string | null): Signer {
    let s = this.unsealed.get(kid)
    if (s === undefined) {
      if (this.unsealed.size >= MAX_CACHED) this.unsealed.clear()
      const publicKey = createPublicKey(pem)
      s = {
        kid,
        publicKeyPem: pem,
        publicKeyRaw: rawPublicKey(publicKey).toString('base64'),
        publicKey,
        privateKey: createPrivateKey({ key: open(this.secretKey, sealed), format: 'der', type: 'pkcs8' }),
        certificate,
      }
      this.unsealed.set(kid, s)
    }
    return s
  }

  protected async read(accountId: string, loadedAt: number): Promise<AccountSigners> {
    let root = await repo.findRootKey(this.sql, accountId)
    if (!root) {
      await createRootKey(this.sql, accountId, this.secretKey)
      root = (await repo.findRootKey(this.sql, accountId))!
    }
    const rows = await repo.listSigners(this.sql, accountId)
    const rootSigner = this.signer(root.kid, root.public_key_pem, root.private_key_sealed, null)
    const publicKeys = new Map<string, { publicKey: KeyObject; revoked: boolean }>([[root.kid, { publicKey: rootSigner.publicKey, revoked: false }]])
    const switches: { at: number; signer: Signer }[] = []
    for (const row of rows) {
      if (row.state === 'revoked') {
        publicKeys.set(row.kid, { publicKey: createPublicKey(row.public_key_pem), revoked: true })
        continue
      }
      const signer = this.signer(row.kid, row.public_key_pem, row.private_key_sealed, row.certificate)
      publicKeys.set(row.kid, { publicKey: signer.publicKey, revoked: false })
      const at = takesOverAt(row)
      if (at !== null) switches.push({ at, signer })
    }
    switches.sort((a, b) => a.at - b.at)
    return { loadedAt, root: rootSigner, switches, publicKeys }
  }

  protected lookup(accountId: string) {
    return this.held.get(accountId)
  }

  protected absentSince(): undefined {
    return undefined
  }

  protected keep(accountId: string, value: AccountSigners | null) {
    if (value === null) return
    if (this.held.size >= MAX_CACHED && !this.held.has(accountId)) this.held.clear()
    this.held.set(accountId, value)
  }

  protected drop(accountId: string) {
    this.held.delete(accountId)
  }

  protected dropAll() {
    this.held.clear()
  }
}

/**
 * One per node (app.ts): signed answers (http/client-answers.ts and the validate fast path), offline
 * licenses and the key set share it.
 */
export class Signers implements AnswerKeys {
  private cache: SignerCache
  private unsubscribe: () => void = () => {}

  constructor(
    sql: Sql,
    secretKey: Uint8Array,
    bus?: Bus,
    rules: { ttlMs: number; degradedTtlMs: number } = { ttlMs: 60_000, degradedTtlMs: 2_000 },
  ) {
    this.cache = new SignerCache(sql, secretKey, { ...rules, trusted: bus ? (now) => bus.trusted(now) : undefined })
    if (bus) {
      this.unsubscribe = bus.subscribe((msg) => {
        if (msg.kind === 'signers') this.cache.invalidate(msg.accountId)
        else if (msg.kind === 'resync') this.cache.clear()
      })
    }
  }

  /** Everything held for the account (loaded, and its root created, on first use). */
  async account(accountId: string): Promise<AccountSigners> {
    return (await this.cache.get(accountId))!
  }

  /** The key that signs for the account at `now`: synchronous once the account is in memory. */
  keyFor(accountId: string, now = Date.now()): Signer | Promise<Signer> {
    const held = this.cache.get(accountId, now)
    if (held instanceof Promise) return held.then((h) => signerAt(h!, Date.now()))
    return signerAt(held!, now)
  }

  /** The key that signs for the account now. */
  async current(accountId: string): Promise<Signer> {
    return signerAt(await this.account(accountId), Date.now())
  }

  /** The account's root key (the one apps pin). */
  async root(accountId: string): Promise<Signer> {
    return (await this.account(accountId)).root
  }

  /** Drops what this node holds for the account (its own writes, before the bus message reaches it). */
  forget(accountId: string) {
    this.cache.invalidate(accountId)
  }

  close() {
    this.unsubscribe()
    this.cache.clear()
  }
}

// Signing keys under the account's root: create (with a certificate signed by the root), activate,
// revoke, the key set, and the activation of scheduled keys. Every change of an account's keys holds
// its root row's lock (repo.lockAccountKeys), first writes down the scheduled activations that are
// due (so the rows always say what every node already computes), and after its commit publishes
// `{kind: 'signers'}` and waits for every node, as a key's revoke does (docs/operations.md, "How the
// nodes stay one service"): when the call returns, every node signs with the new signer.
import { createPublicKey } from 'node:crypto'
import type { Deps } from '../../deps'
import { AppError, invalid, notFound } from '../../core/errors'
import type { Principal } from '../../core/principal'
import { iso, parseInstant } from '../../core/values'
import type { Tx } from '../../infra/db'
import { drainBatches } from '../../infra/batches'
import { seal } from '../../infra/crypto'
import type { RecordCreated } from '../../infra/record-created'
import { byApiKey, emit, SYSTEM } from '../events/outbox'
import { makeCertificate } from './certificate'
import { generateKeyPair, rawPublicKey } from './keys'
import { signKeySet } from './keyset'
import { MAX_UNREVOKED_KEYS, type CreateSigningKeyBody, type KeySet, type SigningKey } from './model'
import * as repo from './repo'
import type { Signers } from './signers'
import { resolve } from './timeline'

const rawOf = (pem: string) => rawPublicKey(createPublicKey(pem)).toString('base64')

/** A key as the API shows it: never the private half, nor the revoke reason. */
export function keyObject(row: repo.SignerRow): SigningKey {
  return {
    kid: row.kid,
    public_key: rawOf(row.public_key_pem),
    state: row.state,
    certificate: row.certificate,
    created_at: iso(row.created_at)!,
    activate_at: iso(row.activate_at),
    activated_at: iso(row.activated_at),
    revoked_at: iso(row.revoked_at),
  }
}

/**
 * Writes down the scheduled activations of the account that are due (the database's clock), oldest
 * first, each retiring the key before it, each with its signing_key.activated event (actor system):
 * the nodes switched at that time on their own (timeline.ts), this only records it. Under the lock.
 */
async function applyDue(tx: Tx, accountId: string): Promise<number> {
  const due = await repo.dueSigners(tx, accountId)
  for (const row of due) {
    const done = await repo.activateSigner(tx, accountId, row.kid, row.activate_at!)
    await emit(tx, accountId, 'signing_key.activated', keyObject(done), SYSTEM)
  }
  return due.length
}

/** Runs `change` under the account's lock, after the due activations; then every node drops its signers. */
async function changeKeys<T>(deps: Deps, accountId: string, change: (tx: Tx) => Promise<T>): Promise<T> {
  const result = (await deps.sql.begin(async (tx) => {
    // The root exists before any key can (the caller loaded it): no row means another account's kid.
    await repo.lockAccountKeys(tx, accountId)
    await applyDue(tx, accountId)
    return change(tx)
  })) as T
  await deps.bus.publish({ kind: 'signers', accountId })
  return result
}

export async function createSigningKey(
  deps: Deps,
  signers: Signers,
  who: Principal,
  input: CreateSigningKeyBody,
  record?: RecordCreated,
): Promise<SigningKey> {
  let activateAt: Date | null = null
  if (input.activate_at != null) {
    activateAt = parseInstant('body.activate_at', input.activate_at)
    if (activateAt.getTime() <= Date.now()) throw invalid('body.activate_at', 'must be in the future')
  }
  const accountId = who.accountId
  // Loaded (or created) and the pair generated before the transaction: neither belongs under a lock.
  const root = await signers.root(accountId)
  const pair = generateKeyPair()
  return changeKeys(deps, accountId, async (tx) => {
    if ((await repo.countUnrevoked(tx, accountId)) >= MAX_UNREVOKED_KEYS) {
      throw new AppError('signing_key_limit', `The account has ${MAX_UNREVOKED_KEYS} signing keys that are not revoked; revoke one first`)
    }
    const createdAt = new Date()
    const certificate = makeCertificate(root.privateKey, {
      kid: pair.kid,
      public_key: rawOf(pair.publicKeyPem),
      account_id: accountId,
      created_at: iso(createdAt)!,
    })
    const row = await repo.insertSigner(tx, {
      kid: pair.kid,
      accountId,
      publicKeyPem: pair.publicKeyPem,
      privateKeySealed: seal(deps.secretKey, pair.privateKeyPkcs8),
      certificate,
      createdAt,
      activateAt,
    })
    const key = keyObject(row)
    await emit(tx, accountId, 'signing_key.created', key, byApiKey(who))
    return record ? ((await record(tx, key)) as SigningKey) : key
  })
}

/** `kid` becomes the one active key now (the one before it retires). Already active: no change. */
export async function activateSigningKey(deps: Deps, signers: Signers, who: Principal, kid: string): Promise<SigningKey> {
  await signers.root(who.accountId)
  return changeKeys(deps, who.accountId, async (tx) => {
    const row = await repo.findSigner(tx, who.accountId, kid)
    if (!row) throw notFound('signing key', kid)
    if (row.state === 'revoked') throw new AppError('signing_key_revoked', `Signing key ${kid} is revoked and can never sign again; create a new one`)
    if (row.state === 'active') return keyObject(row)
    const key = keyObject(await repo.activateSigner(tx, who.accountId, kid, new Date()))
    await emit(tx, who.accountId, 'signing_key.activated', key, byApiKey(who))
    return key
  })
}

/** `kid` signs no more and verifies no more; if it was the active key, the root signs until another is activated. */
export async function revokeSigningKey(deps: Deps, signers: Signers, who: Principal, kid: string, reason: string | null): Promise<SigningKey> {
  await signers.root(who.accountId)
  return changeKeys(deps, who.accountId, async (tx) => {
    const row = await repo.findSigner(tx, who.accountId, kid)
    if (!row) throw notFound('signing key', kid)
    if (row.state === 'revoked') return keyObject(row)
    const key = keyObject(await repo.revokeSigner(tx, who.accountId, kid, reason))
    await emit(tx, who.accountId, 'signing_key.revoked', key, byApiKey(who))
    return key
  })
}

/** The key set as of now, signed by the root; states as every node computes them at this moment. */
export async function keySet(deps: Pick<Deps, 'sql'>, signers: Signers, accountId: string): Promise<KeySet> {
  const root = await signers.root(accountId)
  const now = Date.now()
  const { keys } = resolve(await repo.listSigners(deps.sql, accountId), now)
  return signKeySet(root.privateKey, {
    root: { kid: root.kid, public_key: root.publicKeyRaw },
    keys: keys.map((k) => ({
      kid: k.kid,
      public_key: rawOf(k.public_key_pem),
      state: k.effective,
      certificate: k.certificate,
      created_at: iso(k.created_at)!,
      activated_at: iso(k.since),
      revoked_at: iso(k.revoked_at),
    })),
    issued_at: iso(new Date(now))!,
  })
}

/**
 * The activation sweeper (node.ts, on every node): writes down the scheduled activations that are due
 * and emits their events, exactly once across nodes (each account under its root row's lock, skipped
 * while another node holds it). No bus message: every node switched at that time on its own clock.
 */
export async function activateDueKeys(deps: Pick<Deps, 'sql'>, batch = 100): Promise<number> {
  const { handled } = await drainBatches(batch, async () => {
    let n = 0
    for (const accountId of await repo.accountsWithDueSigners(deps.sql, batch)) {
      n += await deps.sql.begin(async (tx) => ((await repo.lockAccountKeys(tx, accountId, true)) ? applyDue(tx, accountId) : 0))
    }
    return n
  })
  return handled
}

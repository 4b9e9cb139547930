import type { Deps } from '../../deps'
import type { RecordCreated } from '../../infra/record-created'
import { hashKeyValue, isId, newId, newKeyValue, normalizeKeyValue } from '../../infra/crypto'
import { AppError, invalid, notFound } from '../../core/errors'
import { checkMetadata, parseInstant } from '../../core/values'
import { checkCustomer, customerColumns, type Customer } from '../../core/customer'
import { checkEntitlements } from '../../core/entitlements'
import { FLAGGED, type OwnSettings } from '../../core/key-settings'
import type { Principal } from '../../core/principal'
import { listActivations } from '../activations/repo'
import { relaySummaries } from '../relays/repo'
import { byApiKey, emit, type Actor } from '../events/outbox'
import type { Tx } from '../../infra/db'
import { findPolicyWrite, lockPolicy, type PolicyWrite } from '../policies/repo'
import type { CreateKeyBody, Key, KeyStatus, PatchKeyBody, SuspendBody } from './model'
import { transition, type Change, type KeyEventType, type Refusal, type Write } from './lifecycle'
import { checkRefill, initialCredits, replaceCredits } from '../credits/service'
import { newKeyTerms } from './new-key'
import * as repo from './repo'

/** A key's own entitlements as sent: every problem is a 400 field error. */
function checkOwnEntitlements(field: string, value: unknown): Record<string, unknown> {
  const problems = checkEntitlements(value, true)
  if (problems.length === 0) return value as Record<string, unknown>
  const errors = problems.map((p) => ({ field: p.code === null ? field : `${field}.${p.code}`, message: p.message }))
  throw new AppError('invalid_request', `${errors[0]!.field} ${errors[0]!.message}`, { errors })
}

function futureInstant(field: string, text: string): Date {
  const d = parseInstant(field, text)
  if (d.getTime() <= Date.now()) throw invalid(field, 'must be in the future')
  return d
}

/**
 * Creates a key; the key value exists only in the return value (the database keeps its hash, and the
 * Idempotency-Key `record` a sealed copy of the response, in the create's transaction). With a
 * policy: the product is the policy's, settings not given are inherited, and without an explicit
 * expires_at the policy's duration counts from the creation.
 */
export async function createKey(deps: Deps, who: Principal, input: CreateKeyBody, record?: RecordCreated): Promise<Key & { key_value: string }> {
  const expiresAt = input.expires_at ? futureInstant('body.expires_at', input.expires_at) : null
  const metadata = input.metadata === undefined ? {} : checkMetadata('body.metadata', input.metadata)
  const entitlements = input.entitlements === undefined ? {} : checkOwnEntitlements('body.entitlements', input.entitlements)
  const customer = input.customer === undefined ? null : checkCustomer('body.customer', input.customer)
  if (input.policy_id == null && input.product_id === undefined) throw invalid('body.product_id', 'is required without policy_id')
  const created = await deps.sql.begin(async (tx) => {
    const { key, keyValue } = await createKeyIn(tx, who.accountId, input, byApiKey(who), { expiresAt, metadata, entitlements, customer })
    const created = { ...key, key_value: keyValue }
    return record ? record(tx, created) : created
  })
  // A node may hold a negative ("not_found") entry for this value; drop it everywhere before answering.
  await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash: hashKeyValue(normalizeKeyValue(created.key_value)!) })
  return created
}

/**
 * A key created inside the caller's transaction, with its `key.created` event (the API's create, and a
 * payment connector's purchase). The caller publishes the invalidation of `keyHash` after the commit.
 * `checked`: the input's expires_at, metadata, entitlements and customer as already checked.
 */
export async function createKeyIn(
  tx: Tx,
  accountId: string,
  input: CreateKeyBody,
  actor: Actor,
  checked: {
    expiresAt: Date | null
    metadata: Record<string, unknown>
    entitlements: Record<string, unknown>
    externalId?: string | null
    /** who holds it (checkCustomer), null = not recorded */
    customer?: Customer | null
  },
): Promise<{ key: Key; keyValue: string; keyHash: string }> {
  const { expiresAt, metadata, entitlements, externalId } = checked
  const policyId = input.policy_id ?? null
  const keyValue = newKeyValue()
  const keyHash = hashKeyValue(normalizeKeyValue(keyValue)!)
  const createdAt = new Date()
  const who = { accountId }
  {
    let productId = input.product_id
    // the policy's settings without its `keys` count, which would read every key of the policy per creation
    let policy: PolicyWrite | null = null
    if (policyId !== null) {
      // `for share`: a concurrent policy delete (`for update`) waits for this key, then sees it.
      const locked = isId('pol', policyId) ? await lockPolicy(tx, who.accountId, policyId, 'share') : null
      if (!locked) throw notFound('policy', policyId)
      if (productId !== undefined && productId !== locked.product_id) {
        throw invalid('body.product_id', `must be the policy's product (${locked.product_id}) or omitted`)
      }
      productId = locked.product_id
      policy = (await findPolicyWrite(tx, policyId))!
    }
    // `for share` orders this against a concurrent product delete (which takes the row `for update`).
    const [product] = isId('prod', productId!)
      ? await tx`select id from products where id = ${productId!} and account_id = ${who.accountId} for share`
      : []
    if (!product) throw notFound('product', productId!)
    const terms = newKeyTerms(
      {
        own: FLAGGED.filter((f) => input[f] !== undefined),
        activationLimit: input.activation_limit,
        expiresAt,
        firstActivation: null,
        credits: input.credits === undefined ? undefined : initialCredits(input.credits, null),
      },
      policy,
      createdAt,
    )
    const key = await repo.insertKey(tx, {
      id: newId('key'),
      accountId: who.accountId,
      productId: productId!,
      keyHash,
      keyPrefix: keyValue.slice(0, 5),
      // each setting as given (null: not set), the limit as the terms decided, the map as checked
      own: { ...ownGiven(input), activation_limit: terms.activationLimit, entitlements: entitlements as OwnSettings['entitlements'] },
      expiresAt: terms.expiresAt,
      metadata,
      policyId,
      ownFields: terms.ownFields,
      createdAt,
      pendingDuration: terms.pendingDuration,
      credits: terms.credits,
      externalId,
      customer: customerColumns(checked.customer ?? null),
    })
    await emit(tx, who.accountId, 'key.created', key, actor)
    return { key, keyValue, keyHash }
  }
}

export async function getKey(deps: Deps, who: Principal, id: string) {
  const key = isId('key', id) ? await repo.findKey(deps.sql, who.accountId, id) : null
  if (!key) throw notFound('key', id)
  return { ...key, activations: await listActivations(deps.sql, id), relays: await relaySummaries(deps.sql, id) }
}

export async function listKeys(
  deps: Deps,
  who: Principal,
  query: { product_id?: string; policy_id?: string; status?: KeyStatus; plan?: string; key_prefix?: string; q?: string; page?: number; page_size?: number },
) {
  const page = query.page ?? 0
  const pageSize = query.page_size ?? 20
  const { keys, total } = await repo.listKeys(deps.sql, who.accountId, {
    productId: query.product_id,
    status: query.status,
    plan: query.plan,
    policyId: query.policy_id,
    keyPrefix: query.key_prefix,
    q: query.q,
    page,
    pageSize,
  })
  return { data: keys, page, page_size: pageSize, total, has_more: (page + 1) * pageSize < total }
}

/**
 * One change of a key, inside the caller's transaction: lock, read, ask the pure transition
 * (lifecycle.ts), write, read back, emit its event with `actor`. Not found → 404; a refusal is
 * returned for the caller to answer (the API: 409; a connector: recorded in its inbox). `keyHash`:
 * the key's value hash before the change, for the caller to publish after the commit when changed.
 */
export async function changeKey(tx: Tx, actor: Actor, accountId: string, id: string, change: Change): Promise<Changed> {
  const locked = isId('key', id) ? await repo.lockKey(tx, accountId, id) : null
  if (!locked) throw notFound('key', id)
  const before = (await repo.findKey(tx, accountId, id))!
  const own = change.kind === 'patch' ? await repo.ownSettings(tx, id) : undefined
  const t = transition({ key: before, own }, change)
  if ('same' in t) return { kind: 'same', key: before, keyHash: locked.key_hash }
  if ('refused' in t) return { kind: 'refused', key: before, keyHash: locked.key_hash, refusal: t.refused }
  await write(tx, id, t.write)
  const key = (await repo.findKey(tx, accountId, id))!
  // the activations' copy of release_after_seconds follows the effective value
  if (t.write.kind === 'settings' && key.release_after_seconds !== before.release_after_seconds) await repo.copyReleaseAfter(tx, id, key.release_after_seconds)
  await emit(tx, accountId, t.event, key, actor)
  return { kind: 'changed', key, keyHash: locked.key_hash, event: t.event }
}

export type Changed =
  | { kind: 'changed'; key: Key; keyHash: string; event: KeyEventType }
  | { kind: 'same'; key: Key; keyHash: string }
  | { kind: 'refused'; key: Key; keyHash: string; refusal: Refusal }

async function write(tx: Tx, id: string, w: Write): Promise<void> {
  switch (w.kind) {
    case 'revoke':
      return repo.revokeKey(tx, id, w.reason)
    case 'expiry':
      return repo.extendKey(tx, id, w.expiresAt)
    case 'suspend':
      return repo.suspendKey(tx, id, w.reason, w.until)
    case 'reinstate':
      return repo.reinstateKey(tx, id)
    case 'reissue':
      return repo.reissueKey(tx, id, w.keyHash, w.keyPrefix)
    case 'settings':
      await repo.updateSettings(tx, id, w.settings)
      if (w.credits !== undefined) await replaceCredits(tx, id, w.credits)
  }
}

/** The API's frame around changeKey: one transaction, a refusal as its error, the invalidation once committed. */
async function change(deps: Deps, who: Principal, id: string, c: Change): Promise<Changed & { kind: 'changed' | 'same' }> {
  const done = await deps.sql.begin((tx) => changeKey(tx, byApiKey(who), who.accountId, id, c))
  if (done.kind === 'refused') throw new AppError(done.refusal.code, done.refusal.message)
  // the key is in every node's hot state: drop it everywhere before answering
  if (done.kind === 'changed' && c.kind !== 'reissue') await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash: done.keyHash })
  return done
}

/** Revoking is final and idempotent: a second revoke changes nothing and emits nothing. */
export async function revokeKey(deps: Deps, who: Principal, id: string, reason: string | null): Promise<Key> {
  return (await change(deps, who, id, { kind: 'revoke', reason })).key
}

/** New expiry (future) or null (perpetual). An expired key becomes active again; a revoked key is 409. */
export async function extendKey(deps: Deps, who: Principal, id: string, expiresAtText: string | null): Promise<Key> {
  const expiresAt = expiresAtText === null ? null : futureInstant('body.expires_at', expiresAtText)
  return (await change(deps, who, id, { kind: 'extend', expiresAt })).key
}

/**
 * PATCH: new settings, effective on every node before the answer (the rules: lifecycle.ts). Nothing
 * changed (e.g. `{}`) → the key as is, no event, no invalidation. A revoked key takes new settings but
 * stays revoked; a lower activation_limit releases no device.
 */
export async function patchKey(deps: Deps, who: Principal, id: string, input: PatchKeyBody): Promise<Key> {
  const metadata = input.metadata === undefined ? undefined : checkMetadata('body.metadata', input.metadata)
  const entitlements = input.entitlements === undefined ? undefined : checkOwnEntitlements('body.entitlements', input.entitlements)
  const customer = input.customer === undefined ? undefined : checkCustomer('body.customer', input.customer)
  for (const field of input.reset ?? []) if (input[field] !== undefined) throw invalid(`body.${field}`, 'cannot be set and reset in one call')
  const credits =
    input.credits === undefined
      ? undefined
      : { input: input.credits, wanted: input.credits === null ? null : { remaining: input.credits.remaining, refill: checkRefill('body.credits.refill', input.credits.refill) } }
  return (await change(deps, who, id, { kind: 'patch', input, metadata, entitlements, credits, customer })).key
}

/**
 * Suspends a key (validate answers `suspended` on every node before this returns), or replaces the
 * reason and end of a suspension: the call states the suspension as a whole, so an omitted reason or
 * until becomes null. One event when anything changed; a revoked key is 409.
 */
export async function suspendKey(deps: Deps, who: Principal, id: string, input: SuspendBody): Promise<Key> {
  const until = input.until ? futureInstant('body.until', input.until) : null
  return (await change(deps, who, id, { kind: 'suspend', reason: input.reason ?? null, until })).key
}

/** Ends a suspension at once on every node; a key that is not suspended is answered as is, no event. */
export async function reinstateKey(deps: Deps, who: Principal, id: string): Promise<Key> {
  return (await change(deps, who, id, { kind: 'reinstate' })).key
}

/**
 * A new key value for the same key (shown once): devices, offline licenses and history stay. Before
 * this returns, every node forgets the old value (its next validate is `not_found`) and any negative
 * entry for the new one: both hashes in one message and one wait. A revoked key is 409 (a new value
 * for a key that can never validate would only mislead).
 */
export async function reissueKey(deps: Deps, who: Principal, id: string): Promise<Key & { key_value: string }> {
  const keyValue = newKeyValue()
  const keyHash = hashKeyValue(normalizeKeyValue(keyValue)!)
  const done = await change(deps, who, id, { kind: 'reissue', keyHash, keyPrefix: keyValue.slice(0, 5) })
  await deps.bus.publish({ kind: 'keys', keyHashes: [done.keyHash, keyHash] })
  return { ...done.key, key_value: keyValue }
}

/** The key's own value of each setting it may set, as the create body gives it (null: not given). */
function ownGiven(input: CreateKeyBody): Omit<OwnSettings, 'own_fields'> {
  const own: Record<string, unknown> = {}
  for (const s of repo.OWN) own[s.field] = (input as Record<string, unknown>)[s.field] ?? null
  return own as Omit<OwnSettings, 'own_fields'>
}

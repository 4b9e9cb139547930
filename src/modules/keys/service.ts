import { isDeepStrictEqual } from 'node:util'
import type { Deps } from '../../deps'
import type { RecordCreated } from '../../core/record-created'
import { hashKeyValue, isId, newId, newKeyValue, normalizeKeyValue } from '../../infra/crypto'
import { AppError, invalid, notFound } from '../../core/errors'
import { checkMetadata, parseInstant } from '../../core/values'
import type { Principal } from '../../core/principal'
import { listActivations } from '../activations/repo'
import { byApiKey, emit } from '../events/outbox'
import type { CreateKeyBody, Key, KeyStatus, PatchKeyBody } from './model'
import * as repo from './repo'

function futureInstant(field: string, text: string): Date {
  const d = parseInstant(field, text)
  if (d.getTime() <= Date.now()) throw invalid(field, 'must be in the future')
  return d
}

/**
 * Creates a key; the key value exists only in the return value (the database keeps its hash, and the
 * Idempotency-Key `record` a sealed copy of the response, in the create's transaction).
 */
export async function createKey(deps: Deps, who: Principal, input: CreateKeyBody, record?: RecordCreated): Promise<Key & { key_value: string }> {
  const expiresAt = input.expires_at ? futureInstant('body.expires_at', input.expires_at) : null
  const metadata = input.metadata === undefined ? {} : checkMetadata('body.metadata', input.metadata)
  const keyValue = newKeyValue()
  const keyHash = hashKeyValue(normalizeKeyValue(keyValue)!)
  const created = await deps.sql.begin(async (tx) => {
    // `for share` orders this against a concurrent product delete (which takes the row `for update`).
    const [product] = isId('prod', input.product_id)
      ? await tx`select id from products where id = ${input.product_id} and account_id = ${who.accountId} for share`
      : []
    if (!product) throw notFound('product', input.product_id)
    const key = await repo.insertKey(tx, {
      id: newId('key'),
      accountId: who.accountId,
      productId: input.product_id,
      keyHash,
      keyPrefix: keyValue.slice(0, 5),
      plan: input.plan ?? null,
      activationLimit: input.activation_limit ?? 3,
      expiresAt,
      metadata,
      releaseAfterSeconds: input.release_after_seconds ?? null,
      deactivationsAllowed: input.deactivations_allowed ?? null,
    })
    await emit(tx, who.accountId, 'key.created', key, byApiKey(who))
    const created = { ...key, key_value: keyValue }
    return record ? record(tx, created) : created
  })
  // A node may hold a negative ("not_found") entry for this value; drop it everywhere before answering.
  await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash })
  return created
}

export async function getKey(deps: Deps, who: Principal, id: string) {
  const key = isId('key', id) ? await repo.findKey(deps.sql, who.accountId, id) : null
  if (!key) throw notFound('key', id)
  return { ...key, activations: await listActivations(deps.sql, id) }
}

export async function listKeys(
  deps: Deps,
  who: Principal,
  query: { product_id?: string; status?: KeyStatus; plan?: string; key_prefix?: string; page?: number; page_size?: number },
) {
  const page = query.page ?? 0
  const pageSize = query.page_size ?? 20
  const { keys, total } = await repo.listKeys(deps.sql, who.accountId, {
    productId: query.product_id,
    status: query.status,
    plan: query.plan,
    keyPrefix: query.key_prefix,
    page,
    pageSize,
  })
  return { data: keys, page, page_size: pageSize, total, has_more: (page + 1) * pageSize < total }
}

/** Revoking is final and idempotent: a second revoke changes nothing and emits nothing. */
export async function revokeKey(deps: Deps, who: Principal, id: string, reason: string | null): Promise<Key> {
  const { key, keyHash, changed } = await deps.sql.begin(async (tx) => {
    const current = isId('key', id) ? await repo.lockKey(tx, who.accountId, id) : null
    if (!current) throw notFound('key', id)
    const changed = current.status !== 'revoked'
    if (changed) await repo.revokeKey(tx, id, reason)
    const key = (await repo.findKey(tx, who.accountId, id))!
    if (changed) await emit(tx, who.accountId, 'key.revoked', key, byApiKey(who))
    return { key, keyHash: current.key_hash, changed }
  })
  if (changed) await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash })
  return key
}

/** New expiry (future) or null (perpetual). An expired key becomes active again; a revoked key is 409. */
export async function extendKey(deps: Deps, who: Principal, id: string, expiresAtText: string | null): Promise<Key> {
  const expiresAt = expiresAtText === null ? null : futureInstant('body.expires_at', expiresAtText)
  const { key, keyHash } = await deps.sql.begin(async (tx) => {
    const current = isId('key', id) ? await repo.lockKey(tx, who.accountId, id) : null
    if (!current) throw notFound('key', id)
    if (current.status === 'revoked') throw new AppError('key_revoked', `Key ${id} is revoked; revoking is final`)
    await repo.extendKey(tx, id, expiresAt)
    const key = (await repo.findKey(tx, who.accountId, id))!
    await emit(tx, who.accountId, 'key.extended', key, byApiKey(who))
    return { key, keyHash: current.key_hash }
  })
  await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash })
  return key
}

/**
 * PATCH: new settings, effective on every node before the answer. Omitted fields keep their value;
 * `metadata` replaces the whole object. Nothing changed (e.g. `{}`) → the key as is, no event, no
 * invalidation. A revoked key takes new settings but stays revoked; a lower activation_limit releases
 * no device (new devices are refused until enough slots are free).
 */
export async function patchKey(deps: Deps, who: Principal, id: string, input: PatchKeyBody): Promise<Key> {
  const metadata = input.metadata === undefined ? undefined : checkMetadata('body.metadata', input.metadata)
  const { key, keyHash } = await deps.sql.begin(async (tx) => {
    const locked = isId('key', id) ? await repo.lockKey(tx, who.accountId, id) : null
    if (!locked) throw notFound('key', id)
    const current = (await repo.findKey(tx, who.accountId, id))!
    const next: repo.KeySettings = {
      plan: input.plan === undefined ? current.plan : input.plan,
      activationLimit: input.activation_limit ?? current.activation_limit,
      metadata: metadata ?? current.metadata,
      releaseAfterSeconds: input.release_after_seconds === undefined ? current.release_after_seconds : input.release_after_seconds,
      deactivationsAllowed: input.deactivations_allowed === undefined ? current.deactivations_allowed : input.deactivations_allowed,
    }
    const changed =
      next.plan !== current.plan ||
      next.activationLimit !== current.activation_limit ||
      next.releaseAfterSeconds !== current.release_after_seconds ||
      next.deactivationsAllowed !== current.deactivations_allowed ||
      !isDeepStrictEqual(next.metadata, current.metadata)
    if (!changed) return { key: current, keyHash: null }
    await repo.updateSettings(tx, id, next, next.releaseAfterSeconds !== current.release_after_seconds)
    const key = (await repo.findKey(tx, who.accountId, id))!
    await emit(tx, who.accountId, 'key.updated', key, byApiKey(who))
    return { key, keyHash: locked.key_hash }
  })
  // plan and activation_limit are in every node's hot state: drop it everywhere before answering
  if (keyHash) await deps.bus.publish({ kind: 'key', accountId: who.accountId, keyHash })
  return key
}

import type { Deps } from '../../deps'
import { isId, newApiToken, newId } from '../../infra/crypto'
import type { Sql, Tx } from '../../infra/db'
import type { RecordCreated } from '../../infra/record-created'
import { AppError, notFound } from '../../core/errors'
import type { ApiKeyWithToken } from './model'
import { emit, type Actor } from '../events/outbox'
import { hashToken } from './principals'
import * as repo from './repo'
import type { Scope } from '../../core/scopes'

const tokenPrefix = (token: string) => token.slice(0, 7)

/**
 * Creates an API key; the token exists only in the return value. With `record` (Idempotency-Key, only
 * given with a pool, never within account creation's transaction) the insert and the stored response
 * share one transaction.
 */
export async function createApiKey(
  sql: Sql | Tx,
  accountId: string,
  input: { name: string; scope: Scope },
  record?: RecordCreated,
  /** Given for POST /v1/api-keys (with `record`): the api_key.created event, in the same transaction. */
  actor?: Actor,
): Promise<ApiKeyWithToken> {
  const token = newApiToken()
  const insert = async (db: Sql | Tx) => {
    const apiKey = await repo.insertApiKey(db, {
      id: newId('ak'),
      accountId,
      name: input.name,
      scope: input.scope,
      tokenHash: hashToken(token),
      tokenPrefix: tokenPrefix(token),
    })
    if (actor) await emit(db as Tx, accountId, 'api_key.created', apiKey, actor)
    return { ...apiKey, token }
  }
  return record ? (sql as Sql).begin(async (tx) => record(tx, await insert(tx))) : insert(sql)
}

export const listApiKeys = (deps: Deps, accountId: string) => repo.listApiKeys(deps.sql, accountId)

export async function rotateApiKey(deps: Deps, accountId: string, id: string, actor: Actor): Promise<ApiKeyWithToken> {
  const token = newApiToken()
  const rotated = isId('ak', id)
    ? await deps.sql.begin(async (tx) => {
        const done = await repo.rotateApiKey(tx, accountId, id, hashToken(token), tokenPrefix(token))
        if (done) await emit(tx, accountId, 'api_key.rotated', done.apiKey, actor)
        return done
      })
    : null
  if (!rotated) throw notFound('API key', id)
  await deps.bus.publish({ kind: 'api_key', tokenHash: rotated.oldHash })
  return { ...rotated.apiKey, token }
}

/** Refused (409) for the account's last full_access key: rotate it instead, or create another first. */
export async function deleteApiKey(deps: Deps, accountId: string, id: string, actor: Actor): Promise<void> {
  const outcome = isId('ak', id)
    ? await deps.sql.begin(async (tx) => {
        const before = await repo.findApiKey(tx, accountId, id)
        const done = await repo.deleteApiKey(tx, accountId, id)
        if (before && done && done !== 'last_full_access_key') await emit(tx, accountId, 'api_key.deleted', before, actor)
        return done
      })
    : null
  if (!outcome) throw notFound('API key', id)
  if (outcome === 'last_full_access_key') {
    throw new AppError(
      'last_full_access_key',
      `API key ${id} is the account's last full_access key; create another full_access key first, or rotate this one`,
    )
  }
  await deps.bus.publish({ kind: 'api_key', tokenHash: outcome })
}

/** `GET /v1/ping`'s account name (the console's top bar shows it rather than the id). */
export const accountName = (sql: Sql, accountId: string) => repo.accountName(sql, accountId)

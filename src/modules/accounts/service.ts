import type { Deps } from '../../deps'
import { isId, newId } from '../../infra/crypto'
import type { Sql } from '../../infra/db'
import { notFound, foundById } from '../../core/errors'
import type { ApiKeyWithToken } from '../api-keys/model'
import type { Scope } from '../../core/scopes'
import { createApiKey } from '../api-keys/service'
import { emit, OPERATOR } from '../events/outbox'
import { createRootKey } from '../signing/signers'
import type { Account } from './model'
import type { Plan } from '../../core/plans'
import * as repo from './repo'

/**
 * A new account and its first full_access API key (the token exists only in the return value).
 * With `secretKey`, also its offline-license signing key pair (without, it is created on first use).
 */
export async function createAccount(sql: Sql, input: { name: string; plan?: Plan }, secretKey?: Uint8Array) {
  return sql.begin(async (tx) => {
    const account = await repo.insertAccount(tx, { id: newId('acct'), name: input.name, plan: input.plan ?? 'free' })
    const apiKey = await createApiKey(tx, account.id, { name: 'Default', scope: 'full_access' })
    if (secretKey) await createRootKey(tx, account.id, secretKey)
    return { account, api_key: apiKey }
  })
}

export async function listAccounts(sql: Sql, query: { q?: string; page?: number; page_size?: number }) {
  const page = query.page ?? 0
  const pageSize = query.page_size ?? 20
  const { accounts, total } = await repo.listAccounts(sql, { q: query.q, page, pageSize })
  return { data: accounts, page, page_size: pageSize, total, has_more: (page + 1) * pageSize < total }
}

/**
 * The operator issues an API key to an existing account (recovery when it lost its keys). The token
 * exists only in the return value; the `api_key.created` event carries the key without it.
 */
export async function issueApiKey(sql: Sql, accountId: string, input: { name: string; scope: Scope }): Promise<ApiKeyWithToken> {
  return sql.begin(async (tx) => {
    const account = isId('acct', accountId) ? await repo.findAccount(tx, accountId) : null
    if (!account) throw notFound('account', accountId)
    const apiKey = await createApiKey(tx, accountId, input)
    const { token: _token, ...withoutToken } = apiKey
    await emit(tx, accountId, 'api_key.created', withoutToken, OPERATOR)
    return apiKey
  })
}

export async function getAccount(deps: Deps, id: string) {
  const account = await foundById('acct', 'account', id, () => repo.findAccount(deps.sql, id))
  return { ...account, usage: await repo.accountUsage(deps.sql, id) }
}

/** Renames or changes the plan; a plan change emits account.plan_changed and refreshes every node. */
export async function updateAccount(deps: Deps, id: string, patch: { name?: string; plan?: Plan }): Promise<Account> {
  const { account, changed } = await deps.sql.begin(async (tx) => {
    const before = isId('acct', id) ? await repo.findAccount(tx, id, true) : null
    if (!before) throw notFound('account', id)
    const after = await repo.updateAccount(tx, id, patch)
    const changed = patch.plan !== undefined && patch.plan !== before.plan
    if (changed) await emit(tx, id, 'account.plan_changed', { account_id: id, previous_plan: before.plan, plan: after.plan }, OPERATOR)
    return { account: after, changed }
  })
  if (changed) await deps.bus.publish({ kind: 'account', accountId: id })
  return account
}

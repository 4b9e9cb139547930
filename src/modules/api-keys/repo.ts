import type { Sql, Tx } from '../../infra/db'
import { isoDates, type Dated } from '../../core/values'
import type { ApiKey } from './model'
import type { Scope } from '../../core/scopes'

type Row = Dated<ApiKey, 'created_at' | 'last_used_at'>
const toApiKey = (r: Row): ApiKey => isoDates(r, ['created_at', 'last_used_at'])

export async function insertApiKey(
  tx: Sql | Tx,
  k: { id: string; accountId: string; name: string; scope: Scope; tokenHash: string; tokenPrefix: string },
): Promise<ApiKey> {
  const [row] = await tx<Row[]>`insert into api_keys (id, account_id, name, scope, token_hash, token_prefix)
    values (${k.id}, ${k.accountId}, ${k.name}, ${k.scope}, ${k.tokenHash}, ${k.tokenPrefix})
    returning id, name, scope, token_prefix, created_at, last_used_at`
  return toApiKey(row)
}

export async function listApiKeys(sql: Sql, accountId: string): Promise<ApiKey[]> {
  const rows = await sql<Row[]>`select id, name, scope, token_prefix, created_at, last_used_at from api_keys
    where account_id = ${accountId} order by created_at, id`
  return rows.map(toApiKey)
}

export async function findApiKey(sql: Sql | Tx, accountId: string, id: string): Promise<ApiKey | null> {
  const [row] = await sql<Row[]>`select id, name, scope, token_prefix, created_at, last_used_at from api_keys
    where id = ${id} and account_id = ${accountId}`
  return row ? toApiKey(row) : null
}

/** Replaces the token hash; returns the key and the hash that stopped working. */
export async function rotateApiKey(tx: Tx, accountId: string, id: string, tokenHash: string, tokenPrefix: string) {
  const [old] = await tx<{ token_hash: string }[]>`select token_hash from api_keys
    where id = ${id} and account_id = ${accountId} for update`
  if (!old) return null
  const [row] = await tx<Row[]>`update api_keys set token_hash = ${tokenHash}, token_prefix = ${tokenPrefix}
    where id = ${id} returning id, name, scope, token_prefix, created_at, last_used_at`
  return { apiKey: toApiKey(row), oldHash: old.token_hash }
}

/**
 * Deletes an API key unless it is the account's last full_access key (the account could no longer
 * manage its keys or webhooks). The account row is locked first, so two deletes of an account's last
 * two full_access keys run one after the other and the second sees only one left. FOR NO KEY UPDATE
 * does not block writes that merely reference the account (their foreign keys take KEY SHARE).
 * Returns the token hash that stopped working, `last_full_access_key` (nothing deleted), or null (no such key).
 */
export async function deleteApiKey(tx: Tx, accountId: string, id: string): Promise<string | 'last_full_access_key' | null> {
  await tx`select 1 from accounts where id = ${accountId} for no key update`
  const [key] = await tx<{ scope: Scope }[]>`select scope from api_keys where id = ${id} and account_id = ${accountId}`
  if (!key) return null
  if (key.scope === 'full_access') {
    const [{ n }] = await tx<{ n: number }[]>`select count(*)::int as n from api_keys
      where account_id = ${accountId} and scope = 'full_access'`
    if (n <= 1) return 'last_full_access_key'
  }
  const [row] = await tx<{ token_hash: string }[]>`delete from api_keys where id = ${id} and account_id = ${accountId}
    returning token_hash`
  return row?.token_hash ?? null
}

export type PrincipalRow = { api_key_id: string; account_id: string; scope: Scope; plan: string }
export async function findPrincipal(sql: Sql, tokenHash: string): Promise<PrincipalRow | null> {
  const [row] = await sql<PrincipalRow[]>`select k.id as api_key_id, k.account_id, k.scope, a.plan
    from api_keys k join accounts a on a.id = k.account_id where k.token_hash = ${tokenHash}`
  return row ?? null
}

export async function touchApiKeys(sql: Sql, used: Map<string, Date>): Promise<void> {
  if (used.size === 0) return
  const ids = [...used.keys()]
  const times = ids.map((id) => used.get(id)!.toISOString())
  await sql`update api_keys k set last_used_at = greatest(k.last_used_at, v.t)
    from (select unnest(${ids}::text[]) as id, unnest(${times}::timestamptz[]) as t) v where k.id = v.id`
}

import type { Sql, Tx } from '../../infra/db'
import { iso } from '../../core/values'
import type { Account } from './model'
import type { Plan } from '../../core/plans'

type Row = { id: string; name: string; plan: Plan; created_at: Date }
export const toAccount = (r: Row): Account => ({ id: r.id, name: r.name, plan: r.plan, created_at: iso(r.created_at)! })

export async function insertAccount(tx: Tx, a: { id: string; name: string; plan: Plan }): Promise<Account> {
  const [row] = await tx<Row[]>`insert into accounts (id, name, plan) values (${a.id}, ${a.name}, ${a.plan})
    returning id, name, plan, created_at`
  return toAccount(row)
}

export async function findAccount(sql: Sql | Tx, id: string, forUpdate = false): Promise<Account | null> {
  const [row] = forUpdate
    ? await sql<Row[]>`select id, name, plan, created_at from accounts where id = ${id} for update`
    : await sql<Row[]>`select id, name, plan, created_at from accounts where id = ${id}`
  return row ? toAccount(row) : null
}

export async function updateAccount(tx: Tx, id: string, patch: { name?: string; plan?: Plan }): Promise<Account> {
  const [row] = await tx<Row[]>`update accounts set
      name = coalesce(${patch.name ?? null}, name), plan = coalesce(${patch.plan ?? null}, plan), updated_at = now()
    where id = ${id} returning id, name, plan, created_at`
  return toAccount(row)
}

export async function accountUsage(sql: Sql, id: string) {
  const [u] = await sql<{ products: number; keys: number; active_keys: number; activations: number; api_keys: number }[]>`
    select
      (select count(*)::int from products where account_id = ${id}) as products,
      (select count(*)::int from license_keys where account_id = ${id}) as keys,
      (select count(*)::int from license_keys where account_id = ${id} and status = 'active'
         and (expires_at is null or expires_at > now())) as active_keys,
      (select count(*)::int from activations where account_id = ${id}) as activations,
      (select count(*)::int from api_keys where account_id = ${id}) as api_keys`
  return u
}

export async function countAccounts(sql: Sql): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from accounts`
  return n
}

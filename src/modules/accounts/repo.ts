import type { Sql, Tx } from '../../infra/db'
import { iso } from '../../core/values'
import type { Account, AccountWithUsage, Usage } from './model'
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

/** The usage counts of the account `a.id` in the surrounding query, as the columns of `Usage`. */
const usageColumns = (sql: Sql) => sql`
  (select count(*)::int from products where account_id = a.id) as products,
  (select count(*)::int from license_keys where account_id = a.id) as keys,
  (select count(*)::int from license_keys where account_id = a.id and status = 'active'
     and (expires_at is null or expires_at > now())) as active_keys,
  (select count(*)::int from activations where account_id = a.id) as activations,
  (select count(*)::int from api_keys where account_id = a.id) as api_keys`

type UsageRow = Row & Usage
const toAccountWithUsage = (r: UsageRow): AccountWithUsage => ({
  ...toAccount(r),
  usage: { products: r.products, keys: r.keys, active_keys: r.active_keys, activations: r.activations, api_keys: r.api_keys },
})

export async function accountUsage(sql: Sql, id: string): Promise<Usage> {
  const [u] = await sql<Usage[]>`select ${usageColumns(sql)} from accounts a where a.id = ${id}`
  return u
}

export interface AccountFilter {
  /** A case-insensitive prefix of the name, or a (case-sensitive, as ids are) prefix of the id. */
  q?: string
  page: number
  pageSize: number
}

/** Newest first. `starts_with` instead of LIKE: nothing in `q` is a wildcard. */
export async function listAccounts(sql: Sql, f: AccountFilter): Promise<{ accounts: AccountWithUsage[]; total: number }> {
  const where = f.q
    ? sql`where starts_with(lower(a.name), lower(${f.q})) or starts_with(a.id, ${f.q})`
    : sql``
  const [{ total }] = await sql<{ total: number }[]>`select count(*)::int as total from accounts a ${where}`
  const rows = await sql<UsageRow[]>`select a.id, a.name, a.plan, a.created_at, ${usageColumns(sql)}
    from accounts a ${where}
    order by a.created_at desc, a.id desc limit ${f.pageSize} offset ${f.page * f.pageSize}`
  return { accounts: rows.map(toAccountWithUsage), total }
}

export async function countAccounts(sql: Sql): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from accounts`
  return n
}

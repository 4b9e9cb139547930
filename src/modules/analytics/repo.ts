// Reads over the rollup tables of sql/004_analytics.sql (kept exact by triggers) plus two indexed
// counts on license_keys for the time-dependent figures. Each call is one statement: one snapshot.
import type { Sql } from '../../infra/db'
import { VALIDATE_OUTCOMES } from '../../core/outcomes'
import type { CountryEntry, CreditsEntry, TrendEntry, ValidationsEntry } from './model'

// Sums are bigint, which postgres.js returns as text.
const num = (v: string | number | null) => Number(v ?? 0)

export interface StoredOverview {
  total_keys: number
  active_keys: number
  total_activations: number
  activations_today: number
  expiring_soon: number
}

export async function overview(sql: Sql, accountId: string): Promise<StoredOverview> {
  // Effective status: stored-active keys already past expires_at (not yet swept) are not active.
  // Both license_keys counts walk the partial index license_keys_account_expiring.
  const [r] = await sql`select
      (select sum(total) from analytics_key_counts where account_id = ${accountId}) as total_keys,
      (select sum(active) from analytics_key_counts where account_id = ${accountId}) as stored_active,
      (select count(*) from license_keys where account_id = ${accountId} and status = 'active'
         and expires_at is not null and expires_at <= now()) as expired_unswept,
      (select sum(activations) from analytics_country_activations where account_id = ${accountId}) as total_activations,
      (select sum(activations) from analytics_daily_activations where account_id = ${accountId}
         and day = analytics_utc_day(now())) as activations_today,
      (select count(*) from license_keys where account_id = ${accountId} and status = 'active'
         and expires_at is not null and expires_at > now() and expires_at <= now() + interval '7 days') as expiring_soon`
  return {
    total_keys: num(r.total_keys),
    active_keys: num(r.stored_active) - num(r.expired_unswept),
    total_activations: num(r.total_activations),
    activations_today: num(r.activations_today),
    expiring_soon: num(r.expiring_soon),
  }
}

/** What a daily series is read for: the account's rows, optionally one product's, optionally one key's. */
interface Scope {
  accountId: string
  productId: string | null
  keyId?: string | null
}

/**
 * One row per day of the `days` ending today (UTC), oldest first, zero-filled: the sums of `columns`
 * over `table`'s rows of the scope. `table` and `columns` are the code's own names (sql/004_analytics.sql
 * and the outcomes' constants), never input.
 */
async function perDay<T>(sql: Sql, table: string, columns: readonly string[], days: number, f: Scope): Promise<T[]> {
  const sums = sql.unsafe(columns.map((c) => `, sum(${c}) as ${c}`).join(''))
  const picks = sql.unsafe(columns.map((c) => `, c.${c}`).join(''))
  const rows = await sql<Record<string, string | null>[]>`
    with counted as (
      select day ${sums}
      from ${sql(table)}
      where account_id = ${f.accountId} and day > analytics_utc_day(now()) - ${days}::int and day <= analytics_utc_day(now())
        ${f.productId === null ? sql`` : sql`and product_id = ${f.productId}`}
        ${f.keyId == null ? sql`` : sql`and key_id = ${f.keyId}`}
      group by day)
    select to_char(s.day, 'YYYY-MM-DD') as date ${picks}
    from (select analytics_utc_day(now()) - i as day from generate_series(0, ${days}::int - 1) as i) s
      left join counted c on c.day = s.day
    order by s.day`
  return rows.map((r) => {
    const entry: Record<string, number | string> = { date: r.date! }
    for (const c of columns) entry[c] = num(r[c] ?? null)
    return entry as T
  })
}

/** Activations per day. */
export async function trend(sql: Sql, accountId: string, days: number, productId: string | null): Promise<TrendEntry[]> {
  return perDay<TrendEntry>(sql, 'analytics_daily_activations', ['activations'], days, { accountId, productId })
}

/** Validate answers by outcome, per day. */
export async function validations(sql: Sql, accountId: string, days: number, productId: string | null): Promise<ValidationsEntry[]> {
  return perDay<ValidationsEntry>(sql, 'analytics_daily_validations', VALIDATE_OUTCOMES, days, { accountId, productId })
}

/** Credits consumed per day. */
export async function credits(sql: Sql, accountId: string, days: number, f: { productId: string | null; keyId: string | null }): Promise<CreditsEntry[]> {
  return perDay<CreditsEntry>(sql, 'analytics_daily_credits', ['consumed'], days, { accountId, ...f })
}

export async function keyExists(sql: Sql, accountId: string, keyId: string): Promise<boolean> {
  const rows = await sql`select 1 from license_keys where id = ${keyId} and account_id = ${accountId}`
  return rows.length > 0
}

export async function geography(sql: Sql, accountId: string): Promise<CountryEntry[]> {
  const rows = await sql<{ country: string; activations: string }[]>`
    select country, sum(activations) as activations from analytics_country_activations
    where account_id = ${accountId} and country <> ''
    group by country having sum(activations) > 0
    order by 2 desc, country collate "C"`
  return rows.map((r) => ({ country: r.country, activations: num(r.activations) }))
}

export async function productExists(sql: Sql, accountId: string, productId: string): Promise<boolean> {
  const [row] = await sql`select 1 from products where id = ${productId} and account_id = ${accountId}`
  return !!row
}

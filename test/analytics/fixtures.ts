// Fixtures for the analytics tests: activations written straight into the system of record with a
// chosen UTC day and country (the rollup triggers count them exactly as they count takeSeat's).
import { newId } from '../../src/infra/crypto'
import type { Sql } from '../../src/infra/db'
import type { Harness } from '../support/harness'

export interface Activation {
  keyId: string
  /** 0 = today (UTC), 1 = yesterday, ... */
  daysAgo: number
  country?: string | null
  status?: 'active' | 'deactivated'
}

/** Inserts activations in one statement (several rows per statement, as a bulk load would). */
export async function activate(sql: Sql, accountId: string, rows: Activation[]): Promise<void> {
  if (rows.length === 0) return
  const keys = [...new Set(rows.map((r) => r.keyId))]
  const products = new Map(
    (await sql<{ id: string; product_id: string }[]>`select id, product_id from license_keys where id in ${sql(keys)}`).map(
      (k) => [k.id, k.product_id],
    ),
  )
  const ids = rows.map(() => newId('act'))
  const fingerprints = rows.map(() => crypto.getRandomValues(new Uint8Array(32)).reduce((s, b) => s + b.toString(16).padStart(2, '0'), ''))
  await sql`insert into activations (id, account_id, key_id, product_id, device_fingerprint, country, status, activated_at)
    select v.id, ${accountId}, v.key_id, v.product_id, v.fp, v.country, v.status,
      ((analytics_utc_day(now()) - v.days_ago)::timestamp + interval '1 second') at time zone 'UTC'
    from unnest(${ids}::text[], ${rows.map((r) => r.keyId)}::text[], ${rows.map((r) => products.get(r.keyId)!)}::text[],
                ${fingerprints}::text[], ${rows.map((r) => r.country ?? null)}::text[],
                ${rows.map((r) => r.status ?? 'active')}::text[], ${rows.map((r) => r.daysAgo)}::int[])
      as v(id, key_id, product_id, fp, country, status, days_ago)`
}

/** Today's UTC date as the database sees it, and the date `n` days before it. */
export async function utcToday(sql: Sql): Promise<string> {
  const [{ d }] = await sql<{ d: string }[]>`select to_char(analytics_utc_day(now()), 'YYYY-MM-DD') as d`
  return d
}
export const daysBefore = (day: string, n: number) =>
  new Date(Date.parse(`${day}T00:00:00Z`) - n * 86_400_000).toISOString().slice(0, 10)

export async function analytics(h: Harness, token: string, path: string) {
  return h.call('GET', `/v1/analytics/${path}`, { token })
}

/** The overview figures counted straight from the base tables, for comparing with the rollups. */
export async function countedFromRecord(sql: Sql, accountId: string) {
  const [r] = await sql<Record<string, number>[]>`select
    (select count(*)::int from license_keys where account_id = ${accountId}) as total_keys,
    (select count(*)::int from license_keys where account_id = ${accountId} and status = 'active'
       and (expires_at is null or expires_at > now())) as active_keys,
    (select count(*)::int from activations where account_id = ${accountId}) as total_activations,
    (select count(*)::int from activations where account_id = ${accountId}
       and activated_at >= (analytics_utc_day(now())::timestamp at time zone 'UTC')) as activations_today`
  return r
}

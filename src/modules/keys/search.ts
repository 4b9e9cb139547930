// `GET /v1/keys?q=` (docs/api.md, "Customers and search"): one condition over the key's ids, its
// customer and the start of its value, each arm answerable from an index of sql/038_customers.sql so
// Postgres ORs a few bitmap index scans instead of reading the account's keys (docs/decisions.md,
// "Finding keys by customer"). It is ANDed with the list's other filters; the paging is the list's.
import type { Sql, Tx } from '../../infra/db'
import { KEY_PREFIX_PATTERN } from './model'

const PREFIX = new RegExp(KEY_PREFIX_PATTERN)

/** `q` as a LIKE pattern's middle: its own `\`, `%` and `_` are literal. */
export const likeEscaped = (q: string) => q.replace(/[\\%_]/g, (c) => `\\${c}`)

/**
 * The start of a key value as key_prefix holds it (upper case, Crockford base32), or null when `q`
 * cannot be one. Key values are typed in any case (validate normalises them), so the prefix is too.
 */
export function prefixOf(q: string): string | null {
  const upper = q.toUpperCase()
  return PREFIX.test(upper) ? upper : null
}

/**
 * Matches a key when its id, external_id or customer.external_id equals q, its key_prefix starts
 * with q, or its customer e-mail or name contains q ignoring case.
 *
 * The prefix is a range in byte order ('[' follows 'Z'), not LIKE: a LIKE prefix becomes an index range
 * only for a pattern known when planning, and postgres.js sends q as a parameter of a prepared statement.
 */
export function searchCondition(sql: Sql | Tx, q: string) {
  const prefix = prefixOf(q)
  const contains = `%${likeEscaped(q)}%`
  return sql`(k.id = ${q} or k.external_id = ${q} or k.customer_external_id = ${q}
    ${prefix !== null ? sql`or (k.key_prefix collate "C" >= ${prefix} and k.key_prefix collate "C" < ${prefix + '['})` : sql``}
    or k.customer_email ilike ${contains} or k.customer_name ilike ${contains})`
}

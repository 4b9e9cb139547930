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

/** How many characters of q the trigram index is asked for (probeOf). */
export const PROBE_CHARS = 8

/**
 * The part of q the trigram index is asked for: a key whose e-mail or name contains q contains every
 * part of it, so the index may be asked for a part and q itself checked on the few rows it finds. A
 * long q holds common trigrams (`.com`, `.example`, a popular first name), and the index reads a
 * posting list for each: 8 characters (6 trigrams) cost a fraction of 30 and still find few rows
 * (docs/decisions.md, "Finding keys by customer"). With an `@`, the characters around it (the end of
 * the mailbox, the start of the domain: the least shared part of an address); else the first ones.
 */
export function probeOf(q: string): string {
  const chars = [...q]
  if (chars.length <= PROBE_CHARS) return q
  const at = chars.indexOf('@')
  const start = at < 0 ? 0 : Math.max(0, Math.min(at - PROBE_CHARS / 2, chars.length - PROBE_CHARS))
  return chars.slice(start, start + PROBE_CHARS).join('')
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
  const probe = probeOf(q)
  // the index is asked for the probe; `|| ''` keeps the whole q out of the index's question (a check on each row found)
  const text = (column: 'customer_email' | 'customer_name') =>
    probe === q
      ? sql`k.${sql(column)} ilike ${contains}`
      : sql`(k.${sql(column)} ilike ${`%${likeEscaped(probe)}%`} and (k.${sql(column)} || '') ilike ${contains})`
  return sql`(k.id = ${q} or k.external_id = ${q} or k.customer_external_id = ${q}
    ${prefix !== null ? sql`or (k.key_prefix collate "C" >= ${prefix} and k.key_prefix collate "C" < ${prefix + '['})` : sql``}
    or ${text('customer_email')} or ${text('customer_name')})`
}

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

/** How many characters of each part of q the trigram index is asked for (probesOf). */
export const PROBE_CHARS = 8

/**
 * The parts of q the trigram index is asked for: a key whose e-mail or name contains q contains every
 * part of it, so the index may be asked for parts and q itself checked on the few rows they find. The
 * index reads a posting list for each trigram asked for, and the common ones are long: `.com`,
 * `.example`, and the padded ends of words (`es ` of every name ending in "es", ` j` of every one
 * starting with "j"). So (docs/decisions.md, "Finding keys by customer"):
 * - with an `@`, the characters around it (the end of the mailbox, the start of the domain: the least
 *   shared part of an address);
 * - else q's words (runs of letters and digits of 3 or more), the 3 longest, each as its first and its
 *   last 8 characters: inside a word no trigram is padded, and together they find few rows ("james"
 *   and "smith");
 * - q itself when it is short and has no such word (nothing else to ask for).
 */
export function probesOf(q: string): string[] {
  const chars = [...q]
  const at = chars.indexOf('@')
  if (at >= 0) {
    if (chars.length <= PROBE_CHARS) return [q]
    const start = Math.max(0, Math.min(at - PROBE_CHARS / 2, chars.length - PROBE_CHARS))
    return [chars.slice(start, start + PROBE_CHARS).join('')]
  }
  const words = (q.match(/[\p{L}\p{N}]{3,}/gu) ?? []).map((w) => [...w])
  if (words.length === 0) return [chars.length <= PROBE_CHARS ? q : chars.slice(0, PROBE_CHARS).join('')]
  // a word longer than 8: its first 8 and its last 8 characters (`rodriguez48213` is `rodrigue` and
  // `guez4821`: the digits, rarer than any name, are asked for too)
  return words
    .sort((a, b) => b.length - a.length)
    .slice(0, 3)
    .flatMap((w) => (w.length <= PROBE_CHARS ? [w.join('')] : [w.slice(0, PROBE_CHARS).join(''), w.slice(-PROBE_CHARS).join('')]))
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
  const probes = probesOf(q)
  // the index is asked for the probes; `|| ''` keeps the whole q out of the index's question (a check on each row found)
  const text = (column: 'customer_email' | 'customer_name') => {
    if (probes.length === 1 && probes[0] === q) return sql`k.${sql(column)} ilike ${contains}`
    const asked = probes.map((p) => sql`k.${sql(column)} ilike ${`%${likeEscaped(p)}%`}`).reduce((all, part) => sql`${all} and ${part}`)
    return sql`(${asked} and (k.${sql(column)} || '') ilike ${contains})`
  }
  return sql`(k.id = ${q} or k.external_id = ${q} or k.customer_external_id = ${q}
    ${prefix !== null ? sql`or (k.key_prefix collate "C" >= ${prefix} and k.key_prefix collate "C" < ${prefix + '['})` : sql``}
    or ${text('customer_email')} or ${text('customer_name')})`
}

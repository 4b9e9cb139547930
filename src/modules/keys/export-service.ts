// GET /v1/keys/export: every key of the account (filtered as the list is), streamed page by page, so
// memory holds one page whatever the number of keys. Each row is importable as it is (import-rows.ts):
// the key's fields, its product's slug (a fresh installation has other product ids), `key_hash` (its
// portable hash) or, for a hash-only import no one has validated yet, `key_sha256`; NDJSON rows also
// carry the active devices.
import { stringify } from 'csv-stringify/sync'
import type { Deps } from '../../deps'
import { spreadsheetSafe } from './csv-cells'
import { activeDevices, exportPage, type ExportedKey, type ExportFilter } from './export-repo'
import type { ExportQuery } from './import-model'

/** Keys read per query: big enough that a page's round trip is amortised, small enough to hold. */
export const EXPORT_PAGE = 1_000

/** The CSV columns, in order: each is an import row's field. */
export const CSV_COLUMNS = [
  'id', 'external_id', 'key_hash', 'key_sha256', 'key_prefix', 'product_id', 'product_slug', 'policy_id', 'plan', 'status',
  'activation_limit', 'activations_used', 'expires_at', 'created_at', 'revoked_at', 'revoke_reason', 'suspended_at', 'suspend_reason',
  'suspended_until', 'release_after_seconds', 'deactivations_allowed', 'deactivations_used', 'grace_seconds', 'after_expiry',
  'component_match', 'expiry_pending', 'metadata', 'entitlements', 'credits', 'overrides', 'customer_email', 'customer_name', 'customer_external_id',
] as const

const JSON_CELLS = new Set(['metadata', 'entitlements', 'credits', 'overrides'])

function rowOf(e: ExportedKey, format: 'ndjson' | 'csv'): Record<string, unknown> {
  const { key } = e
  const row: Record<string, unknown> = { ...key, product_slug: e.product_slug }
  if (format === 'csv') {
    // a CSV cell is text: the customer takes one column per field (as an import reads them)
    delete row.customer
    row.customer_email = key.customer?.email ?? null
    row.customer_name = key.customer?.name ?? null
    row.customer_external_id = key.customer?.external_id ?? null
  }
  if (e.key_hash !== null) row.key_hash = e.key_hash
  if (e.key_sha256 !== null) row.key_sha256 = e.key_sha256
  return row
}

function csvCells(e: ExportedKey): unknown[] {
  const row = rowOf(e, 'csv')
  return CSV_COLUMNS.map((c) => {
    const v = row[c]
    // an empty cell imports as "none given" (a policy's credits would apply): an unmetered key says null
    if (c === 'credits') return JSON.stringify(v ?? null)
    if (v === undefined || v === null) return ''
    if (JSON_CELLS.has(c)) return JSON.stringify(v)
    // text a spreadsheet would run as a formula is quoted (csv-cells.ts); numbers and booleans never need it
    return typeof v === 'string' ? spreadsheetSafe(v) : v
  })
}

export function exportKeys(deps: Pick<Deps, 'sql'>, who: { accountId: string }, query: ExportQuery): ReadableStream<Uint8Array> {
  const format = query.format ?? 'ndjson'
  const filter: ExportFilter = { productId: query.product_id, policyId: query.policy_id, status: query.status, keyPrefix: query.key_prefix, q: query.q }
  const encoder = new TextEncoder()
  let after: ExportedKey['after'] | null = null
  let started = false
  let done = false
  return new ReadableStream<Uint8Array>({
    // pull: the next page is read only once the client took the last one (backpressure)
    async pull(controller) {
      if (!started && format === 'csv') controller.enqueue(encoder.encode(stringify([[...CSV_COLUMNS]])))
      started = true
      if (done) return controller.close()
      const page = await exportPage(deps.sql, who.accountId, filter, after, EXPORT_PAGE)
      if (page.length < EXPORT_PAGE) done = true
      if (page.length === 0) return controller.close()
      after = page[page.length - 1]!.after
      let text: string
      if (format === 'csv') text = stringify(page.map(csvCells), { cast: { boolean: (b) => String(b) } })
      else {
        const devices = await activeDevices(deps.sql, page.map((e) => e.key.id))
        const byKey = new Map<string, object[]>()
        for (const d of devices) {
          const list = byKey.get(d.key_id) ?? []
          list.push({ device_fingerprint: d.device_fingerprint, device_name: d.device_name, app_version: d.app_version, activated_at: d.activated_at.toISOString() })
          byKey.set(d.key_id, list)
        }
        text = page.map((e) => JSON.stringify({ ...rowOf(e, 'ndjson'), activations: byKey.get(e.key.id) ?? [] })).join('\n') + '\n'
      }
      controller.enqueue(encoder.encode(text))
    },
  })
}

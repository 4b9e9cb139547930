// An import's body → its rows, each with the line an editor shows (docs/api.md, "Import and export"): JSON `{rows}` (rows[i]
// is line i + 1), NDJSON (first line 1) and CSV (header line 1, first row line 2). A row that cannot be
// read (a broken JSON line, a CSV record with the wrong number of cells) is still a row, with its
// problem, so the answer lists every bad row at once. What is wrong with the file as a whole (not
// UTF-8 text, unknown CSV columns, too many rows) is refused before any row is looked at.
import { OVERRIDABLE } from '../../core/key-settings'
import { parse } from 'csv-parse'
import { AppError, invalid, type FieldError } from '../../core/errors'
import { MAX_JSON_DEPTH, nestsDeeperThan, tooWide } from '../../core/json-depth'
import { findUnstorable, notJson, tooDeep, UNSTORABLE } from '../../http/kernel'
import { rowTexts } from './import-json'
import { spreadsheetPlain } from './csv-cells'

/** At most this many rows per request (more: 413). */
export const MAX_IMPORT_ROWS = 10_000
/** At most this many bytes per request (more: 413, before the body is read). */
export const MAX_IMPORT_BYTES = 8 * 1024 * 1024
/**
 * At most this many bytes per NDJSON line or CSV record: what one row may cost in a single synchronous
 * parse (the rows are checked with pauses between them, see import-service.ts). A key with 10,000
 * activations exported fits (docs/api.md, "Import").
 */
export const MAX_IMPORT_LINE_BYTES = 2 * 1024 * 1024

export interface RawRow {
  line: number
  /** the row's fields, or null when the row could not be read (see `problem`) */
  fields: Record<string, unknown> | null
  problem?: FieldError
}

/** The fields an import row may carry: the row of the contract, plus what an export writes (round trip). */
export const ROW_FIELDS = [
  'key', 'key_sha256', 'key_hash', 'external_id', 'product_id', 'product_slug', 'policy_id',
  'expires_at', 'status', 'metadata', 'credits', 'created_at', 'activations',
  // the settings a key may set itself (plan, activation_limit, entitlements and the others, as an
  // export writes them): the table's (core/key-settings.ts)
  ...OVERRIDABLE,
  'revoke_reason', 'suspend_reason', 'suspended_until', 'key_prefix', 'overrides',
  // who holds the key: an object (JSON, NDJSON, an export's) or, in CSV, one column per field
  'customer', 'customer_email', 'customer_name', 'customer_external_id',
  // written by an export, read by no import (the new installation makes its own)
  'id', 'activations_used', 'revoked_at', 'suspended_at', 'deactivations_used', 'expiry_pending',
] as const

/** CSV cells holding JSON. */
const JSON_COLUMNS = new Set(['metadata', 'entitlements', 'credits', 'activations', 'overrides', 'customer'])
/** CSV cells holding integers. */
const INTEGER_COLUMNS = new Set(['activation_limit', 'release_after_seconds', 'deactivations_allowed', 'grace_seconds', 'activations_used', 'deactivations_used'])

const tooMany = () => new AppError('payload_too_large', `An import holds at most ${MAX_IMPORT_ROWS} rows; split the file`)

export type ImportFormat = 'json' | 'ndjson' | 'csv'

/** The format a content type names; JSON when none is given. */
export function formatOf(contentType: string | null | undefined): ImportFormat | null {
  const type = (contentType ?? 'application/json').split(';')[0]!.trim().toLowerCase()
  if (type === 'application/json') return 'json'
  if (type === 'application/x-ndjson' || type === 'application/ndjson') return 'ndjson'
  if (type === 'text/csv') return 'csv'
  return null
}

/**
 * Reading 8 MiB of CSV is about 300 ms of JavaScript and 10,000 NDJSON lines some 30: done in slices,
 * with the event loop free between them, so the node's validate answers never wait for a whole file
 * (docs/decisions.md, "Requests").
 */
const SLICE_BYTES = 64 * 1024
const SLICE_ROWS = 500
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve))

export async function parseRows(format: ImportFormat, body: unknown): Promise<RawRow[]> {
  if (format === 'json') return jsonRows(body)
  if (typeof body !== 'string') throw invalid('body', `must be ${format === 'csv' ? 'CSV' : 'NDJSON'} text`)
  return format === 'csv' ? csvRows(body) : ndjsonRows(body)
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/** `{"rows": [...]}` as text (the route takes the body unparsed: import-json.ts), each row parsed on its own. */
async function jsonRows(body: unknown): Promise<RawRow[]> {
  if (typeof body !== 'string') throw invalid('body', 'must be a JSON object')
  // no pass over the whole text first: the scan is iterative, and each row's depth is checked below
  const texts = await rowTexts(body, MAX_IMPORT_ROWS, tooMany)
  const rows: RawRow[] = []
  let read = 0
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i]!
    // a turn of the event loop every SLICE_ROWS rows, or every 8 slices of text (rows may be large)
    read += text.length
    if (i % SLICE_ROWS === SLICE_ROWS - 1 || read > 8 * SLICE_BYTES) (read = 0), await breathe()
    // the body's depth rule (the body and its rows array are two levels), then what the parse may cost
    if (nestsDeeperThan(text, MAX_JSON_DEPTH - 2)) throw tooDeep()
    const tooMuch = text.length > MAX_IMPORT_LINE_BYTES ? `must be at most ${MAX_IMPORT_LINE_BYTES} bytes` : tooWide(text)
    if (tooMuch !== null) {
      rows.push({ line: i + 1, fields: null, problem: { field: 'row', message: tooMuch } })
      continue
    }
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      throw notJson() // the body is one JSON document: a broken row breaks it, as before
    }
    // the body's own rule (kernel.ts, unstorable), named where it sits in the body, as before
    const bad = findUnstorable(value, `body.rows.${i}`)
    if (bad !== null) throw invalid(bad, UNSTORABLE)
    rows.push(isObject(value) ? { line: i + 1, fields: value } : { line: i + 1, fields: null, problem: { field: 'row', message: 'must be a JSON object' } })
  }
  return rows
}

async function ndjsonRows(text: string): Promise<RawRow[]> {
  const rows: RawRow[] = []
  // line by line, not split() at once: 8 MiB of short lines is millions of strings before the row cap
  for (let i = 0, start = 0; start <= text.length; i++) {
    if (i % SLICE_ROWS === SLICE_ROWS - 1) await breathe()
    let end = text.indexOf('\n', start)
    if (end === -1) end = text.length
    const line = text.slice(start, end).trim()
    start = end + 1
    if (line === '') continue // blank lines (a trailing newline) are not rows
    if (rows.length === MAX_IMPORT_ROWS) throw tooMany()
    // A body's rules (core/json-depth.ts), per line, before JSON.parse
    if (line.length > MAX_IMPORT_LINE_BYTES) {
      rows.push({ line: i + 1, fields: null, problem: { field: 'row', message: `must be at most ${MAX_IMPORT_LINE_BYTES} bytes` } })
      continue
    }
    if (nestsDeeperThan(line)) {
      rows.push({ line: i + 1, fields: null, problem: tooDeepRow('row') })
      continue
    }
    const wide = tooWide(line)
    if (wide !== null) {
      rows.push({ line: i + 1, fields: null, problem: { field: 'row', message: wide } })
      continue
    }
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      rows.push({ line: i + 1, fields: null, problem: { field: 'row', message: 'is not valid JSON' } })
      continue
    }
    if (!isObject(value)) rows.push({ line: i + 1, fields: null, problem: { field: 'row', message: 'must be a JSON object' } })
    else rows.push(storable(i + 1, value))
  }
  return rows
}

/**
 * A row read from its own JSON (an NDJSON line) holds only storable text, as a JSON body must
 * (kernel.ts `unstorable`); else it is a bad row naming the field.
 */
function storable(line: number, fields: Record<string, unknown>): RawRow {
  const bad = findUnstorable(fields, '')
  if (bad === null) return { line, fields }
  return { line, fields: null, problem: { field: bad.replace(/^\./, '') || 'row', message: UNSTORABLE } }
}

type CsvRecord = { record: string[]; info: { bytes: number } }

/** The records of a CSV text, fed to csv-parse's streaming parser a slice at a time (see SLICE_BYTES). */
async function csvRecords(bytes: Buffer): Promise<CsvRecord[]> {
  const records: CsvRecord[] = []
  const parser = parse({ bom: true, info: true, relax_column_count: true, skip_empty_lines: true, max_record_size: MAX_IMPORT_LINE_BYTES })
  let failure: Error | null = null
  parser.on('data', (r: CsvRecord) => records.push(r))
  parser.on('error', (err: Error) => (failure ??= err))
  const ended = new Promise<void>((resolve) => parser.once('end', resolve).once('error', () => resolve()))
  for (let at = 0; at < bytes.length && failure === null; at += SLICE_BYTES) {
    parser.write(bytes.subarray(at, at + SLICE_BYTES))
    // the header and MAX_IMPORT_ROWS rows: no need to read the rest to refuse the file
    if (records.length > MAX_IMPORT_ROWS + 1) {
      parser.destroy()
      throw tooMany()
    }
    await breathe()
  }
  if (failure === null) parser.end()
  await ended
  if (failure !== null) throw failure
  return records
}

async function csvRows(text: string): Promise<RawRow[]> {
  const bytes = Buffer.from(text)
  let records: CsvRecord[]
  try {
    records = await csvRecords(bytes)
  } catch (err) {
    if (err instanceof AppError) throw err
    // a broken quote or the like: csv-parse names the line
    throw invalid('body', `is not valid CSV: ${(err as Error).message}`)
  }
  if (records.length === 0) throw invalid('body', 'must start with a header row naming the columns')
  const header = records[0]!.record.map((c) => c.trim())
  checkHeader(header)
  if (records.length - 1 > MAX_IMPORT_ROWS) throw tooMany()
  const lineOf = lineCounter(bytes)
  let start = records[0]!.info.bytes
  const rows: RawRow[] = []
  for (const [i, { record, info }] of records.slice(1).entries()) {
    if (i % SLICE_ROWS === SLICE_ROWS - 1) await breathe()
    rows.push(csvRow(record, info, header))
  }
  return rows

  function csvRow(record: string[], info: { bytes: number }, header: string[]): RawRow {
    // where the record starts (info.bytes is where the previous one ended): a quoted cell may span lines
    const line = lineOf(start)
    start = info.bytes
    if (record.length !== header.length) {
      return { line, fields: null, problem: { field: 'row', message: `has ${record.length} cells; the header names ${header.length} columns` } }
    }
    const fields: Record<string, unknown> = {}
    const problems: FieldError[] = []
    header.forEach((column, i) => {
      // an export's quote before a would-be formula is not part of the value
      const cell = spreadsheetPlain(record[i]!)
      if (cell === '') return // an empty cell is an absent field
      if (JSON_COLUMNS.has(column)) {
        if (nestsDeeperThan(cell)) return void problems.push(tooDeepRow(column))
        const wide = tooWide(cell)
        if (wide !== null) return void problems.push({ field: column, message: wide })
        try {
          fields[column] = JSON.parse(cell)
        } catch {
          problems.push({ field: column, message: 'must hold JSON' })
          return
        }
        // JSON can spell what Postgres cannot store (`\u0000`, a lone `\ud800`): the body's own rule
        const bad = findUnstorable(fields[column], column)
        if (bad !== null) problems.push({ field: bad, message: UNSTORABLE })
      } else if (INTEGER_COLUMNS.has(column) && /^-?\d{1,15}$/.test(cell.trim())) fields[column] = Number(cell.trim())
      else fields[column] = cell
    })
    return problems.length > 0 ? { line, fields: null, problem: problems[0] } : { line, fields }
  }
}

const tooDeepRow = (field: string): FieldError => ({ field, message: `must not nest objects or arrays more than ${MAX_JSON_DEPTH} levels deep` })

/**
 * The line (from 1) of the first non-blank byte at or after `offset`, for offsets that only grow:
 * counts the line breaks once, however many records.
 */
function lineCounter(bytes: Uint8Array): (offset: number) => number {
  let at = 0
  let line = 1
  return (offset) => {
    while (offset < bytes.length && (bytes[offset] === 0x0a || bytes[offset] === 0x0d)) offset++
    for (; at < offset; at++) if (bytes[at] === 0x0a) line++
    return line
  }
}

/** Wrong columns are the file's problem, not each row's: 400 naming them, and the columns there are. */
function checkHeader(header: string[]) {
  const known = new Set<string>(ROW_FIELDS)
  const unknown = header.filter((c) => !known.has(c))
  const errors: FieldError[] = unknown.map((c) => ({ field: `header.${c || '(empty)'}`, message: 'is not a column of an import row' }))
  const seen = new Set<string>()
  for (const c of header) {
    if (seen.has(c) && known.has(c)) errors.push({ field: `header.${c}`, message: 'is named twice' })
    seen.add(c)
  }
  if (!header.some((c) => c === 'key' || c === 'key_sha256' || c === 'key_hash')) {
    errors.push({ field: 'header', message: 'must name a key column: key, key_sha256 or key_hash' })
  }
  if (!header.some((c) => c === 'product_id' || c === 'product_slug' || c === 'policy_id')) {
    errors.push({ field: 'header', message: 'must name a product column: product_id, product_slug or policy_id' })
  }
  if (errors.length > 0) {
    throw new AppError('invalid_request', `The CSV header is wrong: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}. The columns are: ${ROW_FIELDS.join(', ')}`, { errors })
  }
}

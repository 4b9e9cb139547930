// The JSON format of an import, `{"rows": [...]}`, read in slices as NDJSON and CSV are: one JSON.parse
// of an 8 MiB body holds the event loop for 100-400 ms (a hostile flat array of numbers), and every
// tenant's validate on the node would wait behind it. So the route takes the body as text, and this
// file scans it once (strings skipped, brackets counted, iteratively: each row's depth is checked after)
// for the top-level fields and the elements of `rows`, with the loop free every SCAN_CHARS; each row is
// then parsed on its own, as an NDJSON line is (import-parse.ts). The fields besides `rows` are ignored
// like unknown fields everywhere, but must still be JSON, and hold at most OTHER_FIELDS_BYTES
// (docs/api.md, "Import and export").
import { invalid } from '../../core/errors'
import { MAX_JSON_DEPTH, nestsDeeperThan, stringEnd } from '../../core/json-depth'
import { notJson, tooDeep } from '../../http/kernel'

/** How much text is scanned between two turns of the event loop (≈1-2 ms of work). */
const SCAN_CHARS = 512 * 1024
/** The fields of the body besides `rows`, together: parsed whole, so bounded like a plain JSON body. */
export const OTHER_FIELDS_BYTES = 64 * 1024

const othersTooLarge = () => invalid('body', `the fields besides rows must hold at most ${OTHER_FIELDS_BYTES} bytes`)
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve))

const WS = new Set([0x20, 0x09, 0x0a, 0x0d])
/** Where a primitive (number, true, false, null) ends: at a separator or whitespace. */
const ENDS_PRIMITIVE = new Set([0x2c, 0x5d, 0x7d, 0x20, 0x09, 0x0a, 0x0d])

function skipSpace(text: string, i: number): number {
  while (i < text.length && WS.has(text.charCodeAt(i))) i++
  return i
}

/**
 * The index after the JSON value starting at `i`; throws notJson when there is none there, and
 * `tooLong` when the value runs past `stop` (the scan stops there).
 */
function valueEnd(text: string, i: number, stop = text.length, tooLong: () => Error = notJson): number {
  const c = text.charCodeAt(i)
  if (c === 0x22) {
    const end = stringEnd(text, i)
    if (end === -1) throw notJson()
    return end
  }
  if (c === 0x7b || c === 0x5b) {
    let depth = 0
    const last = Math.min(stop, text.length)
    for (; i < last; i++) {
      const d = text.charCodeAt(i)
      if (d === 0x22) {
        i = stringEnd(text, i) - 1
        if (i === -2) throw notJson()
      } else if (d === 0x7b || d === 0x5b) depth++
      else if ((d === 0x7d || d === 0x5d) && --depth === 0) return i + 1
    }
    throw last < text.length ? tooLong() : notJson()
  }
  let end = i
  while (end < text.length && !ENDS_PRIMITIVE.has(text.charCodeAt(end))) end++
  if (end === i) throw notJson()
  return end
}

/**
 * The texts of the elements of `rows`, in order (each still to be parsed), from a JSON import body.
 * 400 for a body that is not a JSON object, a `rows` that is not an array, other fields over
 * OTHER_FIELDS_BYTES or not JSON; `tooMany` past `maxRows` elements, before any is parsed.
 */
export async function rowTexts(text: string, maxRows: number, tooMany: () => Error): Promise<string[]> {
  let i = skipSpace(text, 0)
  if (i === text.length) throw invalid('body.rows', 'must be an array of rows') // an empty body is {}
  if (text.charCodeAt(i) !== 0x7b) throw invalid('body', 'must be a JSON object')
  let rows: string[] | null = null
  let notArray = false
  const others: string[] = []
  let othersBytes = 0
  i = skipSpace(text, i + 1)
  if (text.charCodeAt(i) === 0x7d) i++
  else {
    for (;;) {
      if (text.charCodeAt(i) !== 0x22) throw notJson()
      const keyEnd = stringEnd(text, i)
      if (keyEnd === -1) throw notJson()
      const key = JSON.parse(text.slice(i, keyEnd)) as string
      i = skipSpace(text, keyEnd)
      if (text.charCodeAt(i) !== 0x3a) throw notJson()
      i = skipSpace(text, i + 1)
      if (key === 'rows' && text.charCodeAt(i) === 0x5b) {
        // a repeated key: the last one counts, as in JSON.parse
        ;({ rows, end: i } = await elements(text, i, maxRows, tooMany))
        notArray = false
      } else {
        const end = valueEnd(text, i, i + OTHER_FIELDS_BYTES - othersBytes + 1, othersTooLarge)
        if (key === 'rows') (rows = null), (notArray = true)
        othersBytes += end - i
        if (othersBytes > OTHER_FIELDS_BYTES) throw othersTooLarge()
        others.push(text.slice(i, end))
        i = end
      }
      i = skipSpace(text, i)
      const c = text.charCodeAt(i)
      if (c === 0x7d) {
        i++
        break
      }
      if (c !== 0x2c) throw notJson()
      i = skipSpace(text, i + 1)
    }
  }
  if (skipSpace(text, i) !== text.length) throw notJson()
  for (const other of others) {
    if (nestsDeeperThan(other, MAX_JSON_DEPTH - 1)) throw tooDeep()
    try {
      JSON.parse(other)
    } catch {
      throw notJson()
    }
  }
  if (rows === null || notArray) throw invalid('body.rows', 'must be an array of rows')
  return rows
}

/** The elements of the array starting at `i` (a `[`), and the index after it. */
async function elements(text: string, i: number, maxRows: number, tooMany: () => Error): Promise<{ rows: string[]; end: number }> {
  const rows: string[] = []
  let scanned = 0
  i = skipSpace(text, i + 1)
  if (text.charCodeAt(i) === 0x5d) return { rows, end: i + 1 }
  for (;;) {
    const end = valueEnd(text, i)
    if (rows.length === maxRows) throw tooMany()
    rows.push(text.slice(i, end))
    scanned += end - i
    if (scanned >= SCAN_CHARS) {
      scanned = 0
      await breathe()
    }
    i = skipSpace(text, end)
    const c = text.charCodeAt(i)
    if (c === 0x5d) return { rows, end: i + 1 }
    if (c !== 0x2c) throw notJson()
    i = skipSpace(text, i + 1)
  }
}

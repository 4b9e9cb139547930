// The JSON format of an import read in slices (src/modules/keys/import-json.ts): the rows' texts found
// by one scan, each parsed on its own, the same answers as one JSON.parse gave, and bounds on what a
// row or the other fields may cost before anything is parsed.
import { expect, test } from 'bun:test'
import { AppError } from '../../src/core/errors'
import { MAX_OBJECT_MEMBERS, MAX_ROW_VALUES, tooWide } from '../../src/core/json-depth'
import { OTHER_FIELDS_BYTES, rowTexts } from '../../src/modules/keys/import-json'
import { parseRows } from '../../src/modules/keys/import-parse'

const tooMany = () => new AppError('payload_too_large', 'too many')
const texts = (body: string, max = 10) => rowTexts(body, max, tooMany)
const refusal = async (body: string, max = 10) => {
  try {
    await texts(body, max)
  } catch (err) {
    return err instanceof AppError ? `${err.code}: ${err.extra.errors?.[0]?.field ?? ''}` : String(err)
  }
  return 'accepted'
}

test('the rows are the elements of rows, whatever the spacing, strings holding brackets and commas, other fields ignored', async () => {
  expect(await texts('{"rows":[]}')).toEqual([])
  expect(await texts(' { "rows" : [ {"a":"],[}{\\"x"} , 1,"s",[2,[3]] ,null ] } \n')).toEqual(['{"a":"],[}{\\"x"}', '1', '"s"', '[2,[3]]', 'null'])
  expect(await texts('{"note":{"a":[1,2]},"rows":[{"k":1}],"more":"x"}')).toEqual(['{"k":1}'])
  // a repeated key: the last counts, as in JSON.parse
  expect(await texts('{"rows":[1],"rows":[2,3]}')).toEqual(['2', '3'])
})

test('what is not {rows: [...]} as JSON is refused as before: 400 naming body or body.rows', async () => {
  expect(await refusal('')).toBe('invalid_request: body.rows')
  expect(await refusal('{}')).toBe('invalid_request: body.rows')
  expect(await refusal('{"rows":5}')).toBe('invalid_request: body.rows')
  expect(await refusal('{"rows":[1],"rows":{}}')).toBe('invalid_request: body.rows')
  expect(await refusal('[1,2]')).toBe('invalid_request: body')
  for (const broken of ['{"rows":[1,]}', '{"rows":[1 2]', '{"rows":[1],}', '{"rows":[1]} x', '{"rows":["a]}', '{"x":tru,"rows":[]}', '{rows:[]}']) {
    expect(await refusal(broken)).toBe('invalid_request: body')
  }
})

test('past the row cap: 413 before a row is parsed; other fields over 64 KiB: 400 before they are read whole', async () => {
  expect(await refusal(`{"rows":[${Array(11).fill('0').join(',')}]}`)).toBe('payload_too_large: ')
  expect(await refusal(`{"pad":"${'x'.repeat(OTHER_FIELDS_BYTES)}","rows":[]}`)).toBe('invalid_request: body')
  expect(await refusal(`{"pad":[${Array(OTHER_FIELDS_BYTES).fill('0').join(',')}],"rows":[]}`)).toBe('invalid_request: body')
})

test("a row's cost is bounded before its parse: values in all, members of one object; a key with 10,000 activations fits", async () => {
  const wide = `{${Array.from({ length: MAX_OBJECT_MEMBERS + 1 }, (_, i) => `"k${i}":0`).join(',')}}`
  expect(tooWide(wide)).toContain('fields')
  expect(tooWide(`[${Array(MAX_ROW_VALUES + 1).fill('0').join(',')}]`)).toContain('values')
  expect(tooWide('{"a":"' + ','.repeat(MAX_ROW_VALUES * 2) + '"}')).toBeNull() // commas in strings are text
  const device = { device_fingerprint: 'a'.repeat(64), device_name: 'Laptop', app_version: '1.0', activated_at: '2024-01-01T00:00:00Z' }
  const big = JSON.stringify({ key: 'legacy-1', product_id: 'prod_x', activations: Array(10_000).fill(device) })
  expect(tooWide(big)).toBeNull()

  const rows = await parseRows('json', `{"rows":[${wide},${big},{"x":1}]}`)
  expect(rows.map((r) => r.problem?.message ?? 'ok')).toEqual([expect.stringContaining(`more than ${MAX_OBJECT_MEMBERS} fields`), 'ok', 'ok'])
  expect(rows.map((r) => r.line)).toEqual([1, 2, 3])
})

// CSV injection (OWASP's rule): an exported cell a spreadsheet would run as a formula (starting with
// `=`, `+`, `-`, `@`, tab or CR) is written with a single quote before it; importing that CSV takes the
// quote off again, so an export still re-imports as it was.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { parse } from 'csv-parse/sync'
import { spreadsheetPlain, spreadsheetSafe } from '../../src/modules/keys/csv-cells'
import { newProduct, useHarness } from '../support/harness'

setDefaultTimeout(60_000)

const h = useHarness()

const FORMULAS = ['=HYPERLINK("http://evil.example","x")', '+1+1', '-2+3', '@SUM(A1)', "'=already quoted", "''twice"]
const PLAIN = ["o'brien", "'plain quote", 'ord-1', 'a=b']

test('a CSV export quotes every text cell a spreadsheet would run; importing it gives the values back', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token, `f-${Math.random().toString(36).slice(2, 8)}`)
  const values = [...FORMULAS, ...PLAIN]
  const rows = values.map((v, i) => ({ key: `formula-value-${i}0000`, external_id: v, plan: v, product_id: product.id, revoke_reason: v, status: 'revoked' }))
  expect((await h.call('POST', '/v1/keys/import', { token, body: { rows } })).status).toBe(201)

  const csv = (await h.call('GET', '/v1/keys/export?format=csv', { token })).body as string
  const [header, ...records] = parse(csv) as string[][]
  const at = (r: string[], c: string) => r[header!.indexOf(c)]!
  const byValue = new Map(records.map((r) => [spreadsheetPlain(at(r, 'external_id')), r]))
  for (const v of values) {
    const r = byValue.get(v)!
    const expected = FORMULAS.includes(v) ? `'${v}` : v
    expect({ v, cells: ['external_id', 'plan', 'revoke_reason'].map((c) => at(r, c)) }).toEqual({ v, cells: [expected, expected, expected] })
  }
  for (const r of records) for (const cell of r) expect(cell).not.toMatch(/^[=+\-@\t\r]/)

  // the same CSV into another account (same product slug): the values come back without the quotes
  const other = await h.account()
  await newProduct(h.call, other.token, product.slug)
  const res = await h.call('POST', '/v1/keys/import', { token: other.token, raw: csv, headers: { 'content-type': 'text/csv' } })
  expect(res.status).toBe(201)
  const back = (await h.call('GET', '/v1/keys/export', { token: other.token })).body as string
  const imported = back.split('\n').filter(Boolean).map((l) => JSON.parse(l))
  expect(imported.map((k) => k.external_id).sort()).toEqual([...values].sort())
  for (const k of imported) expect([k.plan, k.revoke_reason]).toEqual([k.external_id, k.external_id])
})

test('tab and CR starts are quoted too, and the rule is reversible for any text', () => {
  expect(spreadsheetSafe('\tcmd')).toBe("'\tcmd")
  expect(spreadsheetSafe('\rcmd')).toBe("'\rcmd")
  for (const v of ['', "'", "''", "'\t", '=', 'x', "'x", "''=", '-', '😀', ...FORMULAS, ...PLAIN]) {
    expect(spreadsheetPlain(spreadsheetSafe(v))).toBe(v)
    expect(spreadsheetSafe(v)).not.toMatch(/^[=+\-@\t\r]/)
  }
})

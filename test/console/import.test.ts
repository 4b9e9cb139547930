// Import and export in the console, in a real Chromium against a real node: a file with bad rows
// shows every one by line and field and writes nothing; a good file shows the dry run's counts, then
// imports; the keys list's Export buttons download the keys matching the filters.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { newProduct, startHarness, type Harness } from '../support/harness'
import { signedInConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let product: { id: string; slug: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  product = await newProduct(h.call, acct.token, 'my-app')
  c = await signedInConsole(h.node.url, acct.token)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const keys = async () => (await h.call('GET', '/v1/keys?page_size=100', { token: acct.token })).body.data as any[]
const file = (name: string, text: string, mimeType: string) => ({ name, mimeType, buffer: Buffer.from(text) })

test('import: bad rows by line and field, nothing written; a good file: dry-run counts, then import', async () => {
  const { page } = c
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'License keys' }).click()
  await page.getByRole('heading', { name: 'License keys' }).waitFor()
  await page.getByRole('link', { name: 'Import', exact: true }).click()
  await page.getByRole('heading', { name: 'Import keys' }).waitFor()

  const bad = 'key,product_slug,activation_limit\nGOOD-VALUE-001,my-app,2\nbad,my-app,0\nGOOD-VALUE-001,no-such-app,2\n'
  await page.getByLabel('File').setInputFiles(file('bad.csv', bad, 'text/csv'))
  await page.getByRole('heading', { name: '2 rows need fixing' }).waitFor()
  const table = page.getByRole('table')
  expect(await table.getByRole('row').count()).toBe(1 + 3) // header + line 3 (two problems) + line 4 (one)
  expect(await table.textContent()).toContain('activation_limit')
  expect(await table.textContent()).toContain('names no product of this account')
  expect(await keys()).toEqual([])
  await c.shoot('import-errors')

  const sheet = readFileSync(`${import.meta.dir}/../../docs/examples/spreadsheet.csv`, 'utf8')
  await page.getByLabel('File').setInputFiles(file('spreadsheet.csv', sheet, 'text/csv'))
  await page.getByRole('heading', { name: 'Ready to import' }).waitFor()
  expect(await page.getByText('will be created from spreadsheet.csv').textContent()).toContain('3 keys will be created')
  expect(await keys()).toEqual([])
  await c.shoot('import-preview')
  await page.getByRole('button', { name: 'Import 3 keys' }).click()
  await page.getByRole('heading', { name: 'Imported' }).waitFor()
  expect((await keys()).map((k) => k.external_id).sort()).toEqual(['row-2', 'row-3', 'row-4'])
  await c.shoot('import-done')

  // the same file again: everything is skipped
  await page.getByLabel('File').setInputFiles(file('spreadsheet.csv', sheet, 'text/csv'))
  await page.getByText('3 rows are skipped').waitFor()
  expect(await page.getByRole('button', { name: 'Import 0 keys' }).isDisabled()).toBe(true)
}, FLOW)

test('export: the keys list downloads the keys matching its filters, as CSV or NDJSON', async () => {
  const { page } = c
  await h.call('POST', `/v1/keys`, { token: acct.token, body: { product_id: product.id } })
  await page.getByRole('link', { name: 'Back to the keys' }).click()
  await page.getByRole('heading', { name: 'License keys' }).waitFor()
  const all = await keys()
  expect(all.length).toBe(4)

  const [ndjson] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export NDJSON' }).click()])
  expect(ndjson.suggestedFilename()).toMatch(/^keys-\d{4}-\d{2}-\d{2}\.ndjson$/)
  const lines = readFileSync((await ndjson.path())!, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  expect(lines.map((l) => l.id).sort()).toEqual(all.map((k) => k.id).sort())

  await page.getByLabel('Status').selectOption('active')
  await page.getByRole('table').waitFor()
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()])
  const rows = readFileSync((await csv.path())!, 'utf8').trim().split('\n')
  expect(rows[0]).toStartWith('id,external_id,key_hash')
  // the spreadsheet's row-3 expires at the end of 2026: active now, like the others
  expect(rows.length - 1).toBe(all.filter((k) => k.status === 'active').length)
  await c.shoot('keys-export')
}, FLOW)

// A key's customer through the import (a `customer` object in JSON and NDJSON rows, the columns
// customer_email, customer_name, customer_external_id in CSV), bad values named by row and field, and
// the export writing it back (NDJSON: the object; CSV: the columns) so an export re-imports as it was,
// and filtered by the list's search.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newProduct, useHarness } from '../support/harness'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })

async function setup() {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  return { accountId: id, token, product }
}

const importJson = (token: string, rows: unknown[]) => h.call('POST', '/v1/keys/import', { token, body: { rows } })
const importText = (token: string, type: string, raw: string) => h.call('POST', '/v1/keys/import', { token, raw, headers: { 'content-type': type } })
const customersOf = async (token: string) => {
  const res = await h.call('GET', '/v1/keys?page_size=100', { token })
  return Object.fromEntries((res.body.data as { external_id: string; customer: unknown }[]).map((k) => [k.external_id, k.customer]))
}
const lines = (text: string) => text.trim().split('\n').map((l) => JSON.parse(l))

describe('import and export with customers', () => {
  test('JSON, NDJSON and CSV rows carry a customer; the e-mail is lower-cased', async () => {
    const { token, product } = await setup()
    const json = await importJson(token, [
      { key: 'JSON-VALUE-0001', external_id: 'j1', product_id: product.id, customer: { email: 'Ann@Example.com', name: 'Ann', external_id: 'cus_ann' } },
      { key: 'JSON-VALUE-0002', external_id: 'j2', product_id: product.id, customer: null },
      { key: 'JSON-VALUE-0003', external_id: 'j3', product_id: product.id },
    ])
    expect(json.status).toBe(201)
    const ndjson = await importText(
      token,
      'application/x-ndjson',
      JSON.stringify({ key: 'ND-VALUE-0001', external_id: 'n1', product_id: product.id, customer: { name: 'Nina' } }) + '\n',
    )
    expect(ndjson.status).toBe(201)
    const csv = await importText(
      token,
      'text/csv',
      'key,external_id,product_id,customer_email,customer_name,customer_external_id\n' +
        `CSV-VALUE-0001,c1,${product.id},Carl@Example.org,"Carl, Jr.",crm-1\n` +
        `CSV-VALUE-0002,c2,${product.id},,,\n` +
        `CSV-VALUE-0003,c3,${product.id},,Only Name,\n`,
    )
    expect(csv.status).toBe(201)
    expect(await customersOf(token)).toEqual({
      j1: { email: 'ann@example.com', name: 'Ann', external_id: 'cus_ann' },
      j2: null,
      j3: null,
      n1: { email: null, name: 'Nina', external_id: null },
      c1: { email: 'carl@example.org', name: 'Carl, Jr.', external_id: 'crm-1' },
      c2: null,
      c3: { email: null, name: 'Only Name', external_id: null },
    })
    // and the search finds them
    const found = await h.call('GET', '/v1/keys?q=carl', { token })
    expect(found.body.data.map((k: { external_id: string }) => k.external_id)).toEqual(['c1'])
  })

  test('bad customers: every row and field named, nothing imported', async () => {
    const { accountId, token, product } = await setup()
    const json = await importJson(token, [
      { key: 'BAD-VALUE-0001', product_id: product.id, customer: { email: 'nope' } },
      { key: 'BAD-VALUE-0002', product_id: product.id, customer: {} },
      { key: 'BAD-VALUE-0003', product_id: product.id, customer: { name: 'x'.repeat(201), vip: true } },
      { key: 'BAD-VALUE-0004', product_id: product.id, customer: { name: 'A' }, customer_email: 'a@example.com' },
      { key: 'GOOD-VALUE-0005', product_id: product.id, customer: { name: 'Fine' } },
    ])
    expect(json.status).toBe(422)
    expect(json.body.code).toBe('import_invalid')
    expect(json.body.rows.map((r: { line: number; errors: { field: string }[] }) => [r.line, r.errors.map((e) => e.field).sort()])).toEqual([
      [1, ['customer.email']],
      [2, ['customer']],
      [3, ['customer.name', 'customer.vip']],
      [4, ['customer']],
    ])
    const csv = await importText(
      token,
      'text/csv',
      `key,product_id,customer_email,customer_name,customer_external_id\nCSV-BAD-0001,${product.id},not-mail,,\nCSV-BAD-0002,${product.id},,${'n'.repeat(201)},\n`,
    )
    expect(csv.status).toBe(422)
    expect(csv.body.rows.map((r: { line: number; errors: { field: string }[] }) => [r.line, r.errors.map((e) => e.field)])).toEqual([
      [2, ['customer_email']],
      [3, ['customer_name']],
    ])
    const [{ n }] = await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${accountId}`
    expect(n).toBe(0)
  })

  test('export writes the customer (NDJSON: the object, CSV: its columns) and both re-import as they were', async () => {
    const { token, product } = await setup()
    const created = [
      { customer: { email: 'x@one.example', name: 'Xavier =SUM(A1)', external_id: 'cus_x' } },
      { customer: { name: '-dash first' } },
      { customer: null },
    ]
    for (const body of created) expect((await h.call('POST', '/v1/keys', { token, body: { product_id: product.id, ...body } })).status).toBe(201)
    const ndjson = (await h.call('GET', '/v1/keys/export', { token })).body as string
    const rows = lines(ndjson)
    expect(rows.map((r) => r.customer)).toEqual([
      { email: 'x@one.example', name: 'Xavier =SUM(A1)', external_id: 'cus_x' },
      { email: null, name: '-dash first', external_id: null },
      null,
    ])
    // the export takes the list's search too
    const found = (await h.call('GET', '/v1/keys/export?q=ONE.example', { token })).body
    expect(lines(typeof found === 'string' ? found : JSON.stringify(found)).map((r) => r.customer?.email)).toEqual(['x@one.example'])
    const csv = (await h.call('GET', '/v1/keys/export?format=csv', { token })).body as string
    const header = csv.split('\n')[0]!.split(',')
    expect(header.slice(-3)).toEqual(['customer_email', 'customer_name', 'customer_external_id'])
    expect(header).not.toContain('customer')
    expect(csv).toContain("'-dash first") // a spreadsheet would run it: quoted, as every text cell

    for (const [type, text] of [['application/x-ndjson', ndjson], ['text/csv', csv]] as const) {
      const target = await setup()
      // the rows name the exporting account's product: here its slug is the new product's
      const body = text.replaceAll(product.slug, target.product.slug)
      const res = await importText(target.token, type, body)
      expect({ type, status: res.status, body: res.status === 201 ? null : res.body }).toEqual({ type, status: 201, body: null })
      const back = (await h.call('GET', '/v1/keys?page_size=10', { token: target.token })).body.data.map((k: { customer: unknown }) => k.customer)
      expect({ type, customers: back.reverse() }).toEqual({ type, customers: rows.map((r) => r.customer) })
    }
  })
})

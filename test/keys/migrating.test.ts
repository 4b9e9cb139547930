// The worked examples of docs/migrating.md (docs/examples/), imported as the guide says, and the
// values in them validating as the customers have them.
import { createHash } from 'node:crypto'
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newProduct, useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'

setDefaultTimeout(60_000)

const h = useHarness()
const EXAMPLES = `${import.meta.dir}/../../docs/examples`
const read = (name: string) => Bun.file(`${EXAMPLES}/${name}`).text()

async function account() {
  const { token } = await h.account()
  await newProduct(h.call, token, 'my-app')
  return token
}
const importFile = (token: string, name: string, type: string, raw: string, query = '') =>
  h.call('POST', `/v1/keys/import${query}`, { token, raw, headers: { 'content-type': type } })
const validate = async (token: string, key: string, device = fingerprint()) =>
  (await h.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })).body

describe('docs/migrating.md examples', () => {
  test('Keygen: the API export, converted to NDJSON rows, imports and every license key validates', async () => {
    const token = await account()
    const source = JSON.parse(await read('keygen-licenses.json'))
    const ndjson = await read('keygen-licenses.ndjson')
    // the converted file is the export's licenses, one row each (the guide's jq line)
    const rows = ndjson.trim().split('\n').map((l) => JSON.parse(l))
    expect(rows.map((r) => [r.external_id, r.key, r.activation_limit])).toEqual(
      source.data.map((l: any) => [l.id, l.attributes.key, l.attributes.maxMachines]),
    )
    const res = await importFile(token, 'keygen', 'application/x-ndjson', ndjson)
    expect(res.body.rows).toBeUndefined()
    expect(res.body.created).toBe(3)
    const [ada, grace, alan] = source.data.map((l: any) => l.attributes.key as string)
    expect(await validate(token, ada!)).toMatchObject({ valid: true, activation_limit: 3, expires_at: '2027-06-01T00:00:00.000Z' })
    expect(await validate(token, grace!)).toMatchObject({ valid: true, activation_limit: 1, expires_at: null })
    expect(await validate(token, alan!)).toEqual({ valid: false, reason: 'suspended' })
    expect(await validate(token, ada!.toLowerCase())).toEqual({ valid: false, reason: 'not_found' })
    // run again: everything is skipped
    expect((await importFile(token, 'keygen', 'application/x-ndjson', ndjson)).body).toEqual({ created: 0, skipped: 3, keys: [] })
  })

  test('Lemon Squeezy: the license-key CSV as exported is refused by column; edited as the guide says, it imports', async () => {
    const token = await account()
    const raw = await importFile(token, 'ls', 'text/csv', await read('lemonsqueezy-license-keys.csv'), '?dry_run=true')
    expectProblem(raw, 400, 'invalid_request')
    expect(raw.body.errors.map((e: any) => e.field)).toContain('header.License Key')

    const res = await importFile(token, 'ls', 'text/csv', await read('lemonsqueezy-import.csv'))
    expect(res.body.rows).toBeUndefined()
    expect(res.body.keys.map((k: any) => [k.line, k.external_id])).toEqual([[2, 'ls_1001'], [3, 'ls_1002'], [4, 'ls_1003']])
    expect(await validate(token, '38B1460A-5104-4067-A91D-77B872934D51')).toMatchObject({ valid: true, plan: 'Yearly' })
    expect(await validate(token, '38b1460a-5104-4067-a91d-77b872934d51')).toEqual({ valid: false, reason: 'not_found' })
    expect(await validate(token, 'a4c0ad0f-2d5e-4b8f-9d2a-0e6c1b7f3a90')).toMatchObject({ valid: true, plan: 'Lifetime', expires_at: null })
    expect(await validate(token, '6F2E9B1C-7A3D-4E8F-B0C1-D2E3F4A5B6C7')).toEqual({ valid: false, reason: 'revoked' })
  })

  test('Unkey: hashes only (SHA-256 hex) import, and each customer\'s key validates on its first use', async () => {
    const token = await account()
    const plaintexts = ['uk_live_8f2ba1c3d4e5f60718293a4b5c6d7e8f', 'uk_live_0a1b2c3d4e5f60718293a4b5c6d7e8f9', 'uk_live_ffeeddccbbaa99887766554433221100']
    const ndjson = await read('unkey-keys.ndjson')
    // the file holds their hashes, never the keys (the guide turns Unkey's base64 hashes into hex)
    const rows = ndjson.trim().split('\n').map((l) => JSON.parse(l))
    expect(rows.map((r) => r.key_sha256)).toEqual(plaintexts.map((p) => createHash('sha256').update(p).digest('hex')))
    expect(createHash('sha256').update(plaintexts[0]!).digest('base64')).toBe('/1FE4PIGcAVHttufudWmQB91+oKhLDiXDqfWBQv5yAw=')
    const res = await importFile(token, 'unkey', 'application/x-ndjson', ndjson)
    expect(res.body.created).toBe(3)
    for (const p of plaintexts) expect((await validate(token, p)).valid).toBe(true)
    expect(await validate(token, plaintexts[0]!.toUpperCase())).toEqual({ valid: false, reason: 'not_found' })
  })

  test('a spreadsheet saved as CSV: keys, plans, expiries, customers and a device', async () => {
    const token = await account()
    const res = await importFile(token, 'sheet', 'text/csv', await read('spreadsheet.csv'))
    expect(res.body.rows).toBeUndefined()
    expect(res.body.created).toBe(3)
    const laptop = '3f7c1a9e5b2d8c4f6a0e9d7b1c3f5a7e9b2d4c6e8a0f1b3d5c7e9a1b3d5f7a9c'
    expect(await validate(token, 'SALE-2019-0001', laptop)).toMatchObject({ valid: true, plan: 'Standard', activations_used: 1 })
    expect(await validate(token, 'SALE-2019-0002')).toMatchObject({ valid: true, expires_at: '2026-12-31T23:59:59.000Z' })
    expect(await validate(token, 'SALE-2020-0117')).toMatchObject({ valid: true, plan: 'Site licence', activation_limit: 25 })
  })
})

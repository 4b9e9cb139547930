// An imported legacy value's key_prefix is sized to the value (docs/migrating.md): at most a third of
// it and at most 5 characters, nothing under 12 characters, so a short secret is not mostly on show in
// every listing, export and event. A Keyward value keeps its first 5 canonical characters (of 25).
import { createHash } from 'node:crypto'
import { expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newProduct, useHarness } from '../support/harness'

setDefaultTimeout(60_000)

const h = useHarness()

test('key_prefix shows at most a third of an imported value, nothing below 12 characters', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const cases: [string, string][] = [
    ['abc123', ''],
    ['0123456789a', ''],
    ['twelve-chars', 'twel'],
    ['fourteen-chars', 'four'],
    ['fifteen-chars-x', 'fifte'],
    ['LS-4F2A-9B1C-77DE', 'LS-4F'],
    ['ノートパソコンのキーです十二', 'ノートパ'],
  ]
  const res = await h.call('POST', '/v1/keys/import', { token, body: { rows: cases.map(([key]) => ({ key, product_id: product.id })) } })
  expect(res.status).toBe(201)
  const prefixes = await Promise.all(res.body.keys.map(async (k: { id: string }) => (await h.call('GET', `/v1/keys/${k.id}`, { token })).body.key_prefix))
  expect(prefixes).toEqual(cases.map(([, prefix]) => prefix))
  // a value in Keyward's own format keeps its first group, however it was written
  const native = await h.call('POST', '/v1/keys/import', { token, body: { rows: [{ key: '7q2mx-abcde-fghjk-mnpqr-stvwx', product_id: product.id }] } })
  expect((await h.call('GET', `/v1/keys/${native.body.keys[0].id}`, { token })).body.key_prefix).toBe('7Q2MX')
})

test('a hash-only import of a short value still shows nothing once its first validate re-hashes it', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const value = `s${Math.random().toString(36).slice(2, 10)}`
  expect(value.length).toBeLessThan(12)
  const res = await h.call('POST', '/v1/keys/import', { token, body: { rows: [{ key_sha256: createHash('sha256').update(value).digest('hex'), product_id: product.id }] } })
  expect(res.status).toBe(201)
  const id = res.body.keys[0].id
  expect((await h.call('POST', '/v1/validate', { token, body: { key: value, device_fingerprint: fingerprint() } })).body.valid).toBe(true)
  const [row] = await h.node.deps.sql<{ key_prefix: string; imported: boolean }[]>`select key_prefix, not exists (select 1 from key_sha256_imports where key_id = ${id}) as imported from license_keys where id = ${id}`
  expect(row).toEqual({ key_prefix: '', imported: true })
})

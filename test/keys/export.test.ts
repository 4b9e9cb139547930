// GET /v1/keys/export: NDJSON and CSV, the list's filters; and the round trip the contract promises:
// export from one installation, import into a fresh one, and every key validates with its old value
// and keeps its devices.
import { createHash } from 'node:crypto'
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newKey, newProduct, startHarness, useHarness, type Harness } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { EXPORT_PAGE } from '../../src/modules/keys/export-service'

setDefaultTimeout(180_000)

const h = useHarness()
let fresh: Harness | null = null
afterAll(() => fresh?.close())

const validate = (call: Harness['call'], token: string, key: string, device: string) =>
  call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })
// the test client parses a body that is one JSON document (a one-line export) for us
const lines = (body: unknown): any[] =>
  typeof body === 'string' ? body.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l)) : body === null ? [] : [body]

describe('export', () => {
  test('NDJSON and CSV stream every key, oldest first, with the list\'s filters; keys:read', async () => {
    const { token } = await h.account()
    const a = await newProduct(h.call, token)
    const b = await newProduct(h.call, token)
    const k1 = await newKey(h.call, token, a.id, { metadata: { n: 1 } })
    const k2 = await newKey(h.call, token, b.id)
    const k3 = await newKey(h.call, token, a.id)
    await h.call('POST', `/v1/keys/${k3.id}/revoke`, { token, body: {} })

    const all = await h.call('GET', '/v1/keys/export', { token })
    expect(all.status).toBe(200)
    expect(all.headers.get('content-type')).toBe('application/x-ndjson')
    const rows = lines(all.body)
    expect(rows.map((r) => r.id)).toEqual([k1.id, k2.id, k3.id])
    expect(rows[0]).toMatchObject({ product_id: a.id, product_slug: a.slug, metadata: { n: 1 }, activations: [] })
    expect(rows[0].key_hash).toBe(createHash('sha256').update(`license-key:${k1.key_value.replaceAll('-', '')}`).digest('hex'))
    expect(JSON.stringify(rows)).not.toContain(k1.key_value)

    expect(lines((await h.call('GET', `/v1/keys/export?product_id=${a.id}`, { token })).body).map((r) => r.id)).toEqual([k1.id, k3.id])
    expect(lines((await h.call('GET', '/v1/keys/export?status=revoked', { token })).body).map((r) => r.id)).toEqual([k3.id])

    const csv = await h.call('GET', `/v1/keys/export?format=csv&product_id=${b.id}`, { token })
    expect(csv.status).toBe(200)
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8')
    const [header, row, end] = (csv.body as string).split('\n')
    expect(header).toStartWith('id,external_id,key_hash,key_sha256,key_prefix,product_id,product_slug')
    expect(row).toStartWith(`${k2.id},,`)
    expect(end).toBe('')

    expectProblem(await h.call('GET', '/v1/keys/export?format=xml', { token }), 400, 'invalid_request')
    const { token: other } = await h.account()
    const empty = await h.call('GET', '/v1/keys/export', { token: other })
    expect(empty.status).toBe(200)
    expect(lines(empty.body)).toEqual([])
  })

  test('a reissued imported key exports its new value\'s hash, not what the import kept of the old one', async () => {
    const a = await h.account()
    const b = await h.account()
    const product = await newProduct(h.call, b.token)
    const other = await newProduct(h.call, a.token)
    const shared = `shared-${Math.random().toString(36).slice(2)}`
    await h.call('POST', '/v1/keys/import', { token: a.token, body: { rows: [{ key: shared, product_id: other.id }] } })
    const imported = await h.call('POST', '/v1/keys/import', {
      token: b.token,
      body: { rows: [{ key: shared, product_id: product.id }, { key_sha256: createHash('sha256').update('never-typed').digest('hex'), product_id: product.id }] },
    })
    const reissued = await Promise.all(imported.body.keys.map((k: any) => h.call('POST', `/v1/keys/${k.id}/reissue`, { token: b.token })))
    const rows = lines((await h.call('GET', '/v1/keys/export', { token: b.token })).body)
    const hashOf = (value: string) => createHash('sha256').update(`license-key:${value.replaceAll('-', '')}`).digest('hex')
    expect(rows.map((r) => [r.key_hash, r.key_sha256])).toEqual(reissued.map((r) => [hashOf(r.body.key_value), undefined]))
  })

  test('pages follow one another exactly: more keys than a page, created within the same millisecond', async () => {
    const { id: accountId, token } = await h.account()
    const product = await newProduct(h.call, token)
    const rows = Array.from({ length: EXPORT_PAGE + 5 }, (_, i) => ({ key: `page-value-${i}`, product_id: product.id }))
    expect((await h.call('POST', '/v1/keys/import', { token, body: { rows } })).status).toBe(201)
    // microseconds apart, as keys made by concurrent requests can be (a millisecond cursor would repeat rows)
    await h.node.deps.sql`update license_keys k set created_at = '2024-01-01T00:00:00Z'::timestamptz + n.i * interval '1 microsecond'
      from (select id, row_number() over (order by id) as i from license_keys where account_id = ${accountId}) n
      where k.id = n.id`
    const exported = lines((await h.call('GET', '/v1/keys/export', { token })).body)
    expect(exported).toHaveLength(EXPORT_PAGE + 5)
    expect(new Set(exported.map((r) => r.id)).size).toBe(EXPORT_PAGE + 5)
    expect(exported.map((r) => r.id)).toEqual(exported.map((r) => r.id).sort())
  })

  test('round trip: export from one installation, import into a fresh one: every key validates with its old value and devices', async () => {
    const { token } = await h.account()
    const product = await newProduct(h.call, token, `app-${Math.random().toString(36).slice(2, 8)}`)
    const [d1, d2, d3] = [fingerprint(), fingerprint(), fingerprint()]
    // a Keyward key with two devices, an imported exact value with one, a hash-only import, a revoked and an expired key
    const native = await newKey(h.call, token, product.id, { plan: 'pro', activation_limit: 2, metadata: { customer: 'c1' } })
    for (const d of [d1, d2]) expect((await validate(h.call, token, native.key_value, d)).body.valid).toBe(true)
    const legacy = 'Legacy-Value-77'
    const hidden = `hidden-${Math.random().toString(36).slice(2)}`
    const imported = await h.call('POST', '/v1/keys/import', {
      token,
      body: {
        rows: [
          { key: legacy, external_id: 'old-1', product_id: product.id, activations: [{ device_fingerprint: d3, device_name: 'Desk' }] },
          { key_sha256: createHash('sha256').update(hidden).digest('hex'), external_id: 'old-2', product_id: product.id },
          { key: 'revoked-value-9', product_id: product.id, status: 'revoked' },
          { key: 'expired-value-9', product_id: product.id, expires_at: '2021-01-01T00:00:00Z' },
        ],
      },
    })
    expect(imported.status).toBe(201)
    // a metered key with a refill rule, part spent
    const metered = await newKey(h.call, token, product.id, {
      plan: 'metered', credits: { remaining: 40, refill: { amount: 100, interval: 'month', day_of_month: 3, mode: 'add' } },
    })
    expect((await h.call('POST', '/v1/validate', { token, body: { key: metered.key_value, device_fingerprint: d1, cost: 5 } })).body).toMatchObject({ valid: true, credits_remaining: 35 })
    await h.node.deps.validation.credits.flush()
    const meteredCredits = (await h.call('GET', `/v1/keys/${metered.id}`, { token })).body.credits
    expect(meteredCredits).toMatchObject({ remaining: 35, refill: { amount: 100, interval: 'month', day_of_month: 3, mode: 'add' } })

    const ndjson = (await h.call('GET', '/v1/keys/export', { token })).body as string
    expect(typeof ndjson).toBe('string')
    const csv = (await h.call('GET', '/v1/keys/export?format=csv', { token })).body as string
    expect(lines(ndjson)).toHaveLength(6)
    expect(lines(ndjson).find((r) => r.id === metered.id).credits).toEqual(meteredCredits)

    fresh = await startHarness()
    const there = await fresh.account()
    await newProduct(fresh.call, there.token, product.slug)
    const res = await fresh.call('POST', '/v1/keys/import', { token: there.token, raw: ndjson, headers: { 'content-type': 'application/x-ndjson' } })
    expect(res.body.rows).toBeUndefined()
    expect(res.status).toBe(201)
    expect(res.body.created).toBe(6)

    // the devices came along: each holds its slot (no new activation), a third device finds the key full
    expect((await validate(fresh.call, there.token, native.key_value.toLowerCase(), d1)).body).toMatchObject({ valid: true, plan: 'pro', activations_used: 2 })
    expect((await validate(fresh.call, there.token, native.key_value, d2)).body).toMatchObject({ valid: true, activations_used: 2 })
    expect((await validate(fresh.call, there.token, native.key_value, fingerprint())).body).toEqual({ valid: false, reason: 'activation_limit' })
    expect((await validate(fresh.call, there.token, legacy, d3)).body).toMatchObject({ valid: true, activations_used: 1 })
    expect((await validate(fresh.call, there.token, hidden, fingerprint())).body.valid).toBe(true)
    expect((await validate(fresh.call, there.token, 'revoked-value-9', fingerprint())).body).toEqual({ valid: false, reason: 'revoked' })
    expect((await validate(fresh.call, there.token, 'expired-value-9', fingerprint())).body).toEqual({ valid: false, reason: 'expired' })
    const list = (await fresh.call('GET', '/v1/keys?page_size=100', { token: there.token })).body.data
    expect(list.find((k: any) => k.external_id === 'old-1')).toMatchObject({ activations_used: 1 })
    expect(list.find((k: any) => k.plan === 'pro')).toMatchObject({ metadata: { customer: 'c1' }, activations_used: 2, credits: null })
    // the metered key keeps its balance and refill rule, and validate spends from it
    const meteredThere = list.find((k: any) => k.plan === 'metered')
    expect((await fresh.call('GET', `/v1/keys/${meteredThere.id}`, { token: there.token })).body.credits).toEqual(meteredCredits)
    const spend = await fresh.call('POST', '/v1/validate', { token: there.token, body: { key: metered.key_value, device_fingerprint: d1, cost: 5 } })
    expect(spend.body).toMatchObject({ valid: true, credits_remaining: 30 })
    // running it again skips what has an external_id; the rest are now existing values
    expect((await fresh.call('POST', '/v1/keys/import?dry_run=true', { token: there.token, raw: ndjson, headers: { 'content-type': 'application/x-ndjson' } })).status).toBe(422)

    // the CSV export imports too (without devices), into another account of the fresh installation
    const second = await fresh.account()
    await newProduct(fresh.call, second.token, product.slug)
    const fromCsv = await fresh.call('POST', '/v1/keys/import', { token: second.token, raw: csv, headers: { 'content-type': 'text/csv' } })
    expect(fromCsv.body.rows).toBeUndefined()
    expect(fromCsv.body.created).toBe(6)
    const csvKeys = (await fresh.call('GET', '/v1/keys?page_size=100', { token: second.token })).body.data
    expect(csvKeys.find((k: any) => k.plan === 'metered').credits).toEqual(meteredCredits)
    expect(csvKeys.filter((k: any) => k.credits === null)).toHaveLength(5)
    expect((await validate(fresh.call, second.token, native.key_value, fingerprint())).body).toMatchObject({ valid: true, plan: 'pro', activations_used: 1 })
    expect((await validate(fresh.call, second.token, legacy, fingerprint())).body.valid).toBe(true)
  })
})

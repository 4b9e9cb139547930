// POST /v1/keys/import: the three formats, all rows or none with every bad row by line and field,
// re-runs skipped by external_id, dry runs, the limits, one keys.imported event; and the imported
// values validating as customers have them (exact, forgiving for Keyward's format, SHA-256 only,
// Keyward-to-Keyward hashes), per account.
import { createHash } from 'node:crypto'
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf, expectProblem } from '../support/helpers'

setDefaultTimeout(60_000)

// a real socket: validate goes through the fast path, as customers' apps reach it
const h = useHarness()

async function setup() {
  const { id, token } = await h.account()
  const product = await newProduct(h.call, token)
  return { accountId: id, token, product }
}

const importJson = (token: string, rows: unknown[], query = '', headers: Record<string, string> = {}) =>
  h.call('POST', `/v1/keys/import${query}`, { token, body: { rows }, headers })
const importText = (token: string, type: string, raw: string, query = '') =>
  h.call('POST', `/v1/keys/import${query}`, { token, raw, headers: { 'content-type': type } })
const validate = (token: string, key: string, device = fingerprint()) =>
  h.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device } })
const keyCount = async (accountId: string) =>
  (await h.node.deps.sql<{ n: number }[]>`select count(*)::int as n from license_keys where account_id = ${accountId}`)[0]!.n

describe('import', () => {
  test('JSON rows → 201 with ids by line; the keys carry every field; one keys.imported event', async () => {
    const { accountId, token, product } = await setup()
    const device = fingerprint()
    const res = await importJson(token, [
      { key: 'LS-4F2A-9B1C-77DE', external_id: 'ls_1', product_id: product.id, plan: 'pro', activation_limit: 2, metadata: { email: 'a@example.com' } },
      {
        key: 'gum-abc123-XYZ',
        external_id: 'gum_2',
        product_slug: product.slug,
        expires_at: '2020-01-01T00:00:00Z',
        created_at: '2019-01-01T00:00:00Z',
        entitlements: { export: true },
      },
      { key: 'revoked-value-1', product_id: product.id, status: 'revoked', activations: [{ device_fingerprint: device, device_name: 'Old laptop' }] },
    ])
    expect(res.status).toBe(201)
    expect(res.body.created).toBe(3)
    expect(res.body.skipped).toBe(0)
    expect(res.body.keys.map((k: any) => [k.line, k.external_id])).toEqual([[1, 'ls_1'], [2, 'gum_2'], [3, null]])

    const first = (await h.call('GET', `/v1/keys/${res.body.keys[0].id}`, { token })).body
    expect(first).toMatchObject({ plan: 'pro', activation_limit: 2, status: 'active', external_id: 'ls_1', metadata: { email: 'a@example.com' }, key_prefix: 'LS-4F' })
    const second = (await h.call('GET', `/v1/keys/${res.body.keys[1].id}`, { token })).body
    expect(second).toMatchObject({ status: 'expired', expires_at: '2020-01-01T00:00:00.000Z', created_at: '2019-01-01T00:00:00.000Z', entitlements: { export: true } })
    const third = (await h.call('GET', `/v1/keys/${res.body.keys[2].id}`, { token })).body
    expect(third.status).toBe('revoked')
    expect(third.activations.map((a: any) => [a.device_fingerprint, a.device_name, a.status])).toEqual([[device, 'Old laptop', 'active']])

    const events = await eventsOf(h, accountId, 'keys.imported')
    expect(events.map((e) => e.data)).toEqual([{ count: 3, product_ids: [product.id] }])
    expect(await eventsOf(h, accountId, 'key.created')).toEqual([])
  })

  test('NDJSON and CSV (JSON cells, quoted line breaks) import the same rows', async () => {
    const { token, product } = await setup()
    const ndjson = [
      JSON.stringify({ key: 'nd-value-0001', product_id: product.id }),
      '',
      JSON.stringify({ key: 'nd-value-0002', product_id: product.id, metadata: { n: 2 } }),
      '',
    ].join('\n')
    const nd = await importText(token, 'application/x-ndjson', ndjson)
    expect(nd.status).toBe(201)
    expect(nd.body.keys.map((k: any) => k.line)).toEqual([1, 3])

    const csv = [
      'key,product_slug,plan,activation_limit,metadata,activations',
      `csv-value-0001,${product.slug},basic,5,"{""note"":""one"",`,
      `""n"":2}",`,
      `csv-value-0002,${product.slug},,,,"[{""device_fingerprint"":""${'ab'.repeat(32)}""}]"`,
    ].join('\r\n')
    const res = await importText(token, 'text/csv', csv)
    expect(res.body.rows).toBeUndefined()
    expect(res.status).toBe(201)
    expect(res.body.keys.map((k: any) => k.line)).toEqual([2, 4])
    const one = (await h.call('GET', `/v1/keys/${res.body.keys[0].id}`, { token })).body
    expect(one).toMatchObject({ plan: 'basic', activation_limit: 5, metadata: { note: 'one', n: 2 } })
    const two = (await h.call('GET', `/v1/keys/${res.body.keys[1].id}`, { token })).body
    expect(two.activations_used).toBe(1)
    expect((await validate(token, 'csv-value-0002', 'ab'.repeat(32))).body.valid).toBe(true)
  })

  test('every bad row is reported by line and field, and nothing is written', async () => {
    const { accountId, token, product } = await setup()
    const existing = await newKey(h.call, token, product.id)
    const res = await importJson(token, [
      { key: 'good-value-01', product_id: product.id },
      { key: 'good-value-02', key_hash: 'ab'.repeat(32), product_id: product.id },
      { key: 'bad', product_id: product.id, activation_limit: 0, status: 'paused' },
      { key: 'good-value-01', product_id: product.id, external_id: 'dup' },
      { key: existing.key_value.toLowerCase(), product_id: product.id },
      { key: 'good-value-03', product_slug: 'no-such-product', colour: 'red' },
      'not an object',
    ])
    expectProblem(res, 422, 'import_invalid')
    expect(res.body.rows).toEqual([
      { line: 2, external_id: null, errors: [{ field: 'key+key_hash', message: 'exactly one of key, key_sha256 and key_hash is required' }] },
      {
        line: 3,
        external_id: null,
        errors: [
          { field: 'key', message: 'must be 6..256 characters without control characters' },
          { field: 'activation_limit', message: 'must be an integer 1..10000' },
          { field: 'status', message: 'must be one of: active, revoked, suspended' },
        ],
      },
      { line: 4, external_id: 'dup', errors: [{ field: 'key', message: 'appears twice in the file (only its first row is imported)' }] },
      { line: 5, external_id: null, errors: [{ field: 'key', message: 'already exists in this account' }] },
      {
        line: 6,
        external_id: null,
        errors: [
          { field: 'colour', message: 'is not a field of an import row' },
          { field: 'product_slug', message: 'names no product of this account' },
        ],
      },
      { line: 7, external_id: null, errors: [{ field: 'row', message: 'must be a JSON object' }] },
    ])
    expect(await keyCount(accountId)).toBe(1)
    expect(await eventsOf(h, accountId, 'keys.imported')).toEqual([])
  })

  test('broken NDJSON lines and CSV rows with the wrong cells are bad rows; wrong CSV columns are 400', async () => {
    const { accountId, token, product } = await setup()
    const nd = await importText(token, 'application/x-ndjson', `${JSON.stringify({ key: 'fine-value-1', product_id: product.id })}\n{"key": "half\n[1]\n`)
    expectProblem(nd, 422, 'import_invalid')
    expect(nd.body.rows.map((r: any) => [r.line, r.errors[0].message])).toEqual([[2, 'is not valid JSON'], [3, 'must be a JSON object']])

    const cells = await importText(token, 'text/csv', `key,product_id\nfine-value-2,${product.id}\nfine-value-3,${product.id},extra\n`)
    expectProblem(cells, 422, 'import_invalid')
    expect(cells.body.rows).toEqual([{ line: 3, external_id: null, errors: [{ field: 'row', message: 'has 3 cells; the header names 2 columns' }] }])

    const columns = await importText(token, 'text/csv', `licence,product,email\nabc-def-ghi,x,a@b.c\n`)
    expectProblem(columns, 400, 'invalid_request')
    expect(columns.body.errors.map((e: any) => e.field)).toEqual(['header.licence', 'header.product', 'header.email', 'header', 'header'])
    expect(columns.body.detail).toContain('The columns are: key, key_sha256, key_hash')

    const type = await importText(token, 'text/plain', 'key\nabc')
    expectProblem(type, 400, 'invalid_request')
    expect(await keyCount(accountId)).toBe(0)
  })

  test('limits: 10,001 rows → 413, more than 8 MiB → 413, nothing written', async () => {
    const { accountId, token, product } = await setup()
    const rows = Array.from({ length: 10_001 }, (_, i) => ({ key: `limit-value-${i}`, product_id: product.id }))
    expectProblem(await importJson(token, rows), 413, 'payload_too_large')
    const csv = `key,product_id\n${rows.map((r) => `${r.key},${product.id}`).join('\n')}\n`
    expectProblem(await importText(token, 'text/csv', csv), 413, 'payload_too_large')
    const big = `key,product_id,metadata\n` + `x-value-000,${product.id},"{""pad"":""${'x'.repeat(4000)}""}"\n`.repeat(2200)
    expect(big.length).toBeGreaterThan(8 * 1024 * 1024)
    expectProblem(await importText(token, 'text/csv', big), 413, 'payload_too_large')
    expect(await keyCount(accountId)).toBe(0)
  })

  test('a re-run skips rows whose external_id exists; dry_run answers counts and writes nothing', async () => {
    const { accountId, token, product } = await setup()
    const rows = [
      { key: 'rerun-value-1', external_id: 'x1', product_id: product.id },
      { key: 'rerun-value-2', external_id: 'x2', product_id: product.id },
    ]
    const dry = await importJson(token, rows, '?dry_run=true')
    expect(dry.status).toBe(200)
    expect(dry.body).toEqual({ dry_run: true, would_create: 2, would_skip: 0 })
    expect(await keyCount(accountId)).toBe(0)

    expect((await importJson(token, rows.slice(0, 1))).body.created).toBe(1)
    const again = await importJson(token, rows)
    expect(again.status).toBe(201)
    expect(again.body).toMatchObject({ created: 1, skipped: 1 })
    expect(again.body.keys.map((k: any) => k.external_id)).toEqual(['x2'])
    expect((await importJson(token, rows, '?dry_run=true')).body).toEqual({ dry_run: true, would_create: 0, would_skip: 2 })
    expect((await importJson(token, rows)).body).toEqual({ created: 0, skipped: 2, keys: [] })
    expect((await eventsOf(h, accountId, 'keys.imported')).map((e) => e.data.count)).toEqual([1, 1])
  })

  test('credits: as on POST /v1/keys (a policy\'s when the row gives none), bad ones by line and field, an export\'s refills_at honoured', async () => {
    const { accountId, token, product } = await setup()
    const policy = await h.call('POST', '/v1/policies', {
      token, body: { product_id: product.id, name: 'Metered', credits: { initial: 50, refill: { amount: 20, interval: 'month', day_of_month: 15, mode: 'add' } } },
    })
    expect(policy.status).toBe(201)
    const day = 86_400_000
    const lastMidnight = new Date(Math.floor(Date.now() / day) * day)
    const bad = [
      { key: 'credits-bad-01', product_id: product.id, credits: { remaining: -1 } },
      { key: 'credits-bad-02', product_id: product.id, credits: { remaining: 5, refill: { amount: 0, interval: 'day' } } },
      { key: 'credits-bad-03', product_id: product.id, credits: { remaining: 5, refill: { amount: 1, interval: 'day', day_of_month: 3 } } },
      { key: 'credits-bad-04', product_id: product.id, credits: 'lots' },
      { key: 'credits-bad-05', product_id: product.id, credits: { remaining: 1, bonus: 2 } },
      { key: 'credits-bad-06', product_id: product.id, credits: { remaining: 1, refill: { amount: 1, interval: 'week' } } },
      { key: 'credits-bad-07', product_id: product.id, credits: { remaining: 1, refill: { amount: 1, interval: 'month', day_of_month: 32 } } },
      { key: 'credits-bad-08', product_id: product.id, credits: { remaining: 1_000_000_000_001 } },
    ]
    const good = [
      { key: 'credits-own-01', product_id: product.id, credits: { remaining: 7, refill: { amount: 10, interval: 'day' } } },
      { key: 'credits-policy-01', policy_id: policy.body.id },
      { key: 'credits-policy-02', policy_id: policy.body.id, credits: null },
      { key: 'credits-none-01', product_id: product.id },
      // as an export writes them: the refill due at a past refills_at is applied, a future one is still to come
      { key: 'credits-past-01', product_id: product.id, credits: { remaining: 2, refill: { amount: 10, interval: 'day', day_of_month: null, mode: 'top_up' }, refills_at: lastMidnight.toISOString() } },
      { key: 'credits-next-01', product_id: product.id, credits: { remaining: 2, refill: { amount: 10, interval: 'day', day_of_month: null, mode: 'top_up' }, refills_at: new Date(lastMidnight.getTime() + day).toISOString() } },
    ]
    const expected = [
      { field: 'credits.remaining', message: 'must be an integer 0..1000000000000' },
      { field: 'credits.refill.amount', message: 'must be an integer 1..1000000000000' },
      { field: 'credits.refill.day_of_month', message: 'is only for interval month' },
      { field: 'credits', message: 'must be null or {remaining, refill?}' },
      { field: 'credits.bonus', message: 'is not a field of credits' },
      { field: 'credits.refill.interval', message: 'must be one of: day, month' },
      { field: 'credits.refill.day_of_month', message: 'must be an integer 1..31' },
      { field: 'credits.remaining', message: 'must be an integer 0..1000000000000' },
    ].map((e, i) => ({ line: good.length + i + 1, external_id: null, errors: [e] }))
    for (const query of ['?dry_run=true', '']) {
      const refused = await importJson(token, [...good, ...bad], query)
      expectProblem(refused, 422, 'import_invalid')
      expect(refused.body.rows).toEqual(expected)
    }
    expect(await keyCount(accountId)).toBe(0)
    expect((await importJson(token, good, '?dry_run=true')).body).toEqual({ dry_run: true, would_create: good.length, would_skip: 0 })
    expect(await keyCount(accountId)).toBe(0)

    const res = await importJson(token, good)
    expect(res.status).toBe(201)
    const credits = await Promise.all(res.body.keys.map(async (k: any) => (await h.call('GET', `/v1/keys/${k.id}`, { token })).body.credits))
    expect(credits[0]).toMatchObject({ remaining: 7, refill: { amount: 10, interval: 'day', day_of_month: null, mode: 'top_up' } })
    expect(Date.parse(credits[0].refills_at)).toBeGreaterThan(Date.now())
    expect(credits[1]).toMatchObject({ remaining: 50, refill: { amount: 20, interval: 'month', day_of_month: 15, mode: 'add' } })
    expect(credits.slice(2, 4)).toEqual([null, null])
    expect(credits[4].remaining).toBe(10)
    expect(credits[5].remaining).toBe(2)
    // they spend as created keys do
    expect((await validate(token, 'credits-own-01')).body).toMatchObject({ valid: true, credits_remaining: 6 })
    const spent = await h.call('POST', '/v1/validate', { token, body: { key: 'credits-policy-01', device_fingerprint: fingerprint(), cost: 50 } })
    expect(spent.body).toMatchObject({ valid: true, credits_remaining: 0 })
    expect((await validate(token, 'credits-policy-01')).body).toMatchObject({ valid: false, reason: 'credits_exhausted' })
    expect((await validate(token, 'credits-none-01')).body).toMatchObject({ valid: true, credits_remaining: null })

    // CSV: the cell holds JSON; a bad one is a bad row by line and field
    const csv = [
      'key,product_id,credits',
      `credits-csv-01,${product.id},"{""remaining"":3,""refill"":{""amount"":5,""interval"":""month""}}"`,
      `credits-csv-02,${product.id},"{""remaining"":""3""}"`,
    ].join('\n')
    const csvBad = await importText(token, 'text/csv', csv)
    expectProblem(csvBad, 422, 'import_invalid')
    expect(csvBad.body.rows).toEqual([{ line: 3, external_id: null, errors: [{ field: 'credits.remaining', message: 'must be an integer 0..1000000000000' }] }])
    const csvOk = await importText(token, 'text/csv', csv.split('\n').slice(0, 2).join('\n'))
    expect(csvOk.status).toBe(201)
    const fromCsv = (await h.call('GET', `/v1/keys/${csvOk.body.keys[0].id}`, { token })).body.credits
    expect(fromCsv).toMatchObject({ remaining: 3, refill: { amount: 5, interval: 'month', day_of_month: 1, mode: 'top_up' } })
  })

  test('Idempotency-Key replays the first answer', async () => {
    const { accountId, token, product } = await setup()
    const rows = [{ key: 'idem-value-01', product_id: product.id }]
    const first = await importJson(token, rows, '', { 'idempotency-key': 'imp-1' })
    const second = await importJson(token, rows, '', { 'idempotency-key': 'imp-1' })
    expect(second.status).toBe(201)
    expect(second.body).toEqual(first.body)
    expect(second.headers.get('idempotent-replayed')).toBe('true')
    expect(await keyCount(accountId)).toBe(1)
  })
})

describe('imported values validate as customers have them', () => {
  test('exact values: trimmed, case-sensitive; Keyward-format values: forgiving', async () => {
    const { token, product } = await setup()
    const keyward = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'.replace('ABCDE', Math.random().toString(36).slice(2, 7).toUpperCase().replace(/[ILOU]/g, '1'))
    const res = await importJson(token, [
      { key: 'Legacy-Key-AbC123', product_id: product.id },
      { key: keyward, product_id: product.id },
    ])
    expect(res.status).toBe(201)
    expect((await validate(token, 'Legacy-Key-AbC123')).body.valid).toBe(true)
    expect((await validate(token, '  Legacy-Key-AbC123\n')).body.valid).toBe(true)
    expect((await validate(token, 'legacy-key-abc123')).body).toEqual({ valid: false, reason: 'not_found' })
    expect((await validate(token, keyward.toLowerCase().replaceAll('-', ''))).body.valid).toBe(true)
    // the holder's routes find them too
    const device = fingerprint()
    expect((await validate(token, 'Legacy-Key-AbC123', device)).body.valid).toBe(true)
    const devices = await h.call('POST', '/v1/devices', { token, body: { key: 'Legacy-Key-AbC123' } })
    expect(devices.status).toBe(200)
    expect((await h.call('POST', '/v1/deactivate', { token, body: { key: 'Legacy-Key-AbC123', device_fingerprint: device } })).body.deactivated).toBe(true)
  })

  test('key_sha256 rows match the original value and are re-hashed into Keyward\'s form on first validate', async () => {
    const { token, product } = await setup()
    const value = `unkey_${Math.random().toString(36).slice(2)}`
    const sha = createHash('sha256').update(value).digest('hex')
    const res = await importJson(token, [{ key_sha256: sha, product_id: product.id, external_id: 'uk_1' }])
    expect(res.status).toBe(201)
    const id = res.body.keys[0].id
    const sql = h.node.deps.sql
    expect((await sql`select 1 from key_sha256_imports where key_id = ${id}`).length).toBe(1)
    expect((await validate(token, 'not-the-value')).body.valid).toBe(false)
    expect((await validate(token, value)).body.valid).toBe(true)
    expect((await sql`select 1 from key_sha256_imports where key_id = ${id}`).length).toBe(0)
    const [row] = await sql<{ key_hash: string }[]>`select key_hash from license_keys where id = ${id}`
    expect(row!.key_hash).toBe(createHash('sha256').update(`license-key:${value}`).digest('hex'))
    expect((await validate(token, value)).body.valid).toBe(true)
    expect((await h.call('GET', `/v1/keys/${id}`, { token })).body.key_prefix).toBe(value.slice(0, 5))
    // the same hash again is now the existing value
    expectProblem(await importJson(token, [{ key: value, product_id: product.id }]), 422, 'import_invalid')
  })

  test('values are unique per account: two accounts may hold the same value, each validates its own', async () => {
    const a = await setup()
    const b = await setup()
    const value = `shared-${Math.random().toString(36).slice(2)}`
    expect((await importJson(a.token, [{ key: value, product_id: a.product.id, plan: 'a' }])).status).toBe(201)
    expect((await importJson(b.token, [{ key: value, product_id: b.product.id, plan: 'b' }])).status).toBe(201)
    expect((await validate(a.token, value)).body).toMatchObject({ valid: true, plan: 'a' })
    expect((await validate(b.token, value)).body).toMatchObject({ valid: true, plan: 'b' })
    // a Keyward key of one account imported (by value or by hash) into another
    const native = await newKey(h.call, a.token, a.product.id, { plan: 'native' })
    expect((await importJson(b.token, [{ key: native.key_value, product_id: b.product.id, plan: 'copy' }])).status).toBe(201)
    expect((await validate(b.token, native.key_value)).body).toMatchObject({ valid: true, plan: 'copy' })
    expect((await validate(a.token, native.key_value)).body).toMatchObject({ valid: true, plan: 'native' })
    const c = await setup()
    const hash = createHash('sha256').update(`license-key:${native.key_value.replaceAll('-', '')}`).digest('hex')
    expect((await importJson(c.token, [{ key_hash: hash, product_id: c.product.id, plan: 'by-hash' }])).status).toBe(201)
    expect((await validate(c.token, native.key_value.toLowerCase())).body).toMatchObject({ valid: true, plan: 'by-hash' })
    expect((await importJson(c.token, [{ key_hash: hash, product_id: c.product.id }])).body.rows[0].errors[0].message).toBe('already exists in this account')
  })
})

// POST /v1/validate over HTTP: every answer of the decision order, the product check, known devices,
// recorded device details, request validation (400s), scopes, and the Elysia route giving the same
// answers as the fast path a listening node serves.
import { describe, expect, test } from 'bun:test'
import { startNode } from '../../src/node'
import { client, realPostgres, scopedToken, useHarness, testConfig } from '../support/harness'
import { activationRows, events, fingerprint, setup, validate } from './support'

const h = useHarness()

describe('decision order', () => {
  test('a new device takes a slot; the same device again is valid without a new activation', async () => {
    const { token, key } = await setup(h, { activation_limit: 2, plan: 'pro' })
    const fp = fingerprint()
    const first = await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })
    expect(first.status).toBe(200)
    expect(first.headers.get('content-type')).toStartWith('application/json')
    expect(first.headers.get('x-request-id')).toMatch(/^req_/)
    expect(first.body).toEqual({
      valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 2, policy_id: null, entitlements: {}, expired: false, grace_until: null, credits_remaining: null,
    })
    // case-insensitive fingerprint, key in lower case without hyphens and with whitespace
    const again = await validate(h.call, token, {
      key: `  ${key.key_value.replaceAll('-', '').toLowerCase()} `,
      device_fingerprint: fp.toUpperCase(),
    })
    expect(again.body).toEqual(first.body)
    expect(await activationRows(h.node.deps.sql, key.id)).toHaveLength(1)
    expect(await events(h.node.deps.sql, 'activation.created', key.id)).toHaveLength(1)
  })

  test('activation_limit once every slot is taken; valid again for the holders', async () => {
    const { token, key } = await setup(h, { activation_limit: 2 })
    const [a, b, c] = [fingerprint(), fingerprint(), fingerprint()]
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a })).body.activations_used).toBe(1)
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: b })).body.activations_used).toBe(2)
    const refused = await validate(h.call, token, { key: key.key_value, device_fingerprint: c })
    expect(refused.status).toBe(200)
    expect(refused.body).toEqual({ valid: false, reason: 'activation_limit' })
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a })).body.valid).toBe(true)
    expect(await activationRows(h.node.deps.sql, key.id)).toHaveLength(2)
  })

  test('not_found: unknown key, unparseable key, another account\'s key, another product', async () => {
    const mine = await setup(h)
    const theirs = await setup(h)
    const fp = fingerprint()
    const notFound = { valid: false, reason: 'not_found' }
    const unknown = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'
    for (const key of [unknown, 'not a key at all', 'ABCDE-FGHJK-MNPQR-STVWX-YZ01I', theirs.key.key_value]) {
      const res = await validate(h.call, mine.token, { key, device_fingerprint: fp })
      expect(res.status).toBe(200)
      expect(res.body).toEqual(notFound)
    }
    // the other account's key really is valid for its owner, and took no slot from our attempt
    expect((await validate(h.call, theirs.token, { key: theirs.key.key_value, device_fingerprint: fp })).body.activations_used).toBe(1)
    // product_id must be the key's product
    const other = await h.call('POST', '/v1/products', { token: mine.token, body: { name: 'Other', slug: 'other' } })
    expect(other.status).toBe(201)
    for (const product_id of [other.body.id, theirs.product.id, 'prod_nonsense']) {
      const res = await validate(h.call, mine.token, { key: mine.key.key_value, device_fingerprint: fp, product_id })
      expect(res.body).toEqual(notFound)
    }
    const right = await validate(h.call, mine.token, { key: mine.key.key_value, device_fingerprint: fp, product_id: mine.product.id })
    expect(right.body.valid).toBe(true)
    expect(await activationRows(h.node.deps.sql, mine.key.id)).toHaveLength(1)
  })

  test('revoked wins over a known device; expired once expires_at passes', async () => {
    const { token, key } = await setup(h)
    const fp = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
    expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body).toEqual({ valid: false, reason: 'revoked' })

    const soon = new Date(Date.now() + 1_000).toISOString()
    const expiring = await setup(h, { expires_at: soon })
    const valid = await validate(h.call, expiring.token, { key: expiring.key.key_value, device_fingerprint: fp })
    expect(valid.body).toMatchObject({ valid: true, expires_at: soon })
    await Bun.sleep(1_100)
    for (const device of [fp, fingerprint()]) {
      const res = await validate(h.call, expiring.token, { key: expiring.key.key_value, device_fingerprint: device })
      expect(res.body).toEqual({ valid: false, reason: 'expired' })
    }
    expect(await activationRows(h.node.deps.sql, expiring.key.id)).toHaveLength(1)
  })
})

describe('device details', () => {
  test('country and app_version are recorded; repeat validations update last_validated_at and app_version in batches', async () => {
    const { token, key } = await setup(h)
    const fp = fingerprint()
    await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, app_version: '1.0.0' }, { 'cf-ipcountry': 'de' })
    const other = fingerprint()
    await validate(h.call, token, { key: key.key_value, device_fingerprint: other }, { 'cf-ipcountry': 'T1' })
    let detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
    const [first, second] = detail.body.activations
    expect(first).toMatchObject({ device_fingerprint: fp, app_version: '1.0.0', country: 'DE', status: 'active' })
    expect(second).toMatchObject({ device_fingerprint: other, app_version: null, country: null })
    const firstSeen = first.last_validated_at
    expect(firstSeen).not.toBeNull()

    await Bun.sleep(5)
    await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, app_version: '2.0.0' }, { 'cf-ipcountry': 'FR' })
    await validate(h.call, token, { key: key.key_value, device_fingerprint: fp }) // no app_version: keeps 2.0.0
    await h.node.deps.validation.flush()
    detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
    const updated = detail.body.activations[0]
    expect(updated.app_version).toBe('2.0.0')
    expect(updated.country).toBe('DE') // the country of the call that created the activation
    expect(Date.parse(updated.last_validated_at)).toBeGreaterThan(Date.parse(firstSeen))
  })

  test('a clean shutdown writes the batched last-seen updates before closing', async () => {
    const { token, key } = await setup(h)
    const fp = fingerprint()
    await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, app_version: '1.0.0' })
    // a second node on the same database whose timer would not flush for ten minutes
    const config = testConfig({ FLUSH_INTERVAL_MS: '600000' }, h.db.url)
    const second = await startNode(config, realPostgres ? {} : { db: await h.db.open() })
    await validate(client(second.url), token, { key: key.key_value, device_fingerprint: fp, app_version: '3.1.4' })
    expect(second.deps.validation.lastSeen.size).toBe(1)
    await second.stop()
    const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
    expect(detail.body.activations[0].app_version).toBe('3.1.4')
  })
})

describe('request validation', () => {
  test('each malformed body is a 400 problem with errors, not a valid:false answer', async () => {
    const { token, key } = await setup(h)
    const fp = fingerprint()
    const bad: [string, unknown][] = [
      ['missing key', { device_fingerprint: fp }],
      ['missing fingerprint', { key: key.key_value }],
      ['empty body', undefined],
      ['key not a string', { key: 123, device_fingerprint: fp }],
      ['empty key', { key: '', device_fingerprint: fp }],
      ['key too long', { key: 'A'.repeat(257), device_fingerprint: fp }],
      ['fingerprint too short', { key: key.key_value, device_fingerprint: fp.slice(1) }],
      ['fingerprint not hex', { key: key.key_value, device_fingerprint: 'g'.repeat(64) }],
      ['fingerprint not a string', { key: key.key_value, device_fingerprint: 42 }],
      ['app_version too long', { key: key.key_value, device_fingerprint: fp, app_version: 'v'.repeat(65) }],
      ['app_version not a string', { key: key.key_value, device_fingerprint: fp, app_version: 2 }],
      ['product_id not a string', { key: key.key_value, device_fingerprint: fp, product_id: ['x'] }],
      ['NUL in app_version', { key: key.key_value, device_fingerprint: fp, app_version: 'a\u0000b' }],
      ['array body', [key.key_value, fp]],
    ]
    for (const [what, body] of bad) {
      const res = await h.call('POST', '/v1/validate', { token, body })
      expect({ what, status: res.status }).toEqual({ what, status: 400 })
      expect(res.headers.get('content-type')).toBe('application/problem+json')
      expect(res.body.code).toBe('invalid_request')
      expect(res.body.errors.length).toBeGreaterThan(0)
      expect(res.body.request_id).toBe(res.headers.get('x-request-id'))
    }
    for (const raw of ['{"key": ', 'not json', '\u00ff\u00fe']) {
      const res = await h.call('POST', '/v1/validate', { token, raw, headers: { 'content-type': 'application/json' } })
      expect(res.status).toBe(400)
      expect(res.body.errors).toEqual([{ field: 'body', message: 'must be valid JSON' }])
    }
    const huge = await h.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fp, pad: 'x'.repeat(70_000) } })
    expect(huge.status).toBe(413)
    // none of those counted as an activation; unknown fields are ignored
    expect(await activationRows(h.node.deps.sql, key.id)).toHaveLength(0)
    const extra = await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, extra: { nested: true } })
    expect(extra.body.valid).toBe(true)
  })

  test('a caller-supplied request id is echoed on answers and problems', async () => {
    const { token, key } = await setup(h)
    const ok = await validate(h.call, token, { key: key.key_value, device_fingerprint: fingerprint() }, { 'x-request-id': 'trace-123' })
    expect(ok.headers.get('x-request-id')).toBe('trace-123')
    const bad = await h.call('POST', '/v1/validate', { token, body: {}, headers: { 'x-request-id': 'trace-456' } })
    expect(bad.body.request_id).toBe('trace-456')
  })

  test('scopes: validate and full_access may validate; others 403; no token 401', async () => {
    const { token, key } = await setup(h)
    const body = { key: key.key_value, device_fingerprint: fingerprint() }
    const validateOnly = await scopedToken(h.call, token, 'validate')
    expect((await validate(h.call, validateOnly, body)).body.valid).toBe(true)
    const reader = await scopedToken(h.call, token, 'keys:read')
    const forbidden = await validate(h.call, reader, body)
    expect(forbidden.status).toBe(403)
    expect(forbidden.body.code).toBe('insufficient_scope')
    for (const t of [null, 'kw_' + 'x'.repeat(32), 'garbage']) {
      const res = await h.call('POST', '/v1/validate', { token: t, body: {} })
      expect(res.status).toBe(401)
      expect(res.headers.get('content-type')).toBe('application/problem+json')
    }
  })
})

test('the Elysia route (app.handle) answers exactly as the served fast path', async () => {
  const { token, key } = await setup(h, { activation_limit: 1 })
  const fp = fingerprint()
  const viaApp = async (body: unknown) => {
    const res = await h.node.app.handle(
      new Request('http://localhost/v1/validate', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    )
    return { status: res.status, body: (await res.json()) as any }
  }
  const cases = [
    { key: key.key_value, device_fingerprint: fp },
    { key: key.key_value, device_fingerprint: fingerprint() },
    { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', device_fingerprint: fp },
    { key: key.key_value, device_fingerprint: 'xyz' },
    { device_fingerprint: fp },
  ]
  for (const body of cases) {
    const served = await validate(h.call, token, body)
    const handled = await viaApp(body)
    expect(handled.status).toBe(served.status)
    if (served.status === 400) {
      // same fields named (TypeBox may word or repeat a message differently through Elysia's compiler)
      const fields = (errors: { field: string }[]) => [...new Set(errors.map((e) => e.field))]
      expect(fields(handled.body.errors)).toEqual(fields(served.body.errors))
      expect(handled.body.code).toBe(served.body.code)
    } else {
      expect(handled.body).toEqual(served.body)
    }
  }
})

test('/metrics counts validate answers, cache lookups and the route latency', async () => {
  const { token, key } = await setup(h)
  const value = async (name: string) => {
    const text = await (await fetch(`${h.node.url}/metrics`)).text()
    const line = text.split('\n').find((l) => l.startsWith(name))
    return line ? Number(line.split(' ').pop()) : 0
  }
  const valid = 'keyward_validate_answers_total{outcome="valid"}'
  const notFound = 'keyward_validate_answers_total{outcome="not_found"}'
  const hits = 'keyward_hot_cache_lookups_total{result="hit"}'
  const latency = 'keyward_http_request_duration_seconds_count{method="POST",route="/v1/validate",status="200"}'
  const before = await Promise.all([valid, notFound, hits, latency].map(value))
  const fp = fingerprint()
  for (let i = 0; i < 3; i++) await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })
  await validate(h.call, token, { key: 'nonsense', device_fingerprint: fp })
  const after = await Promise.all([valid, notFound, hits, latency].map(value))
  expect(after[0] - before[0]).toBe(3)
  expect(after[1] - before[1]).toBe(1)
  expect(after[2] - before[2]).toBe(2) // the first call loaded the key; the next two were hits
  expect(after[3] - before[3]).toBe(4)
})

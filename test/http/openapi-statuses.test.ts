// Every status an operation answers is in /docs/json. This file drives one request per error class
// each operation can meet (NUL in the query, no token, wrong scope, unknown id, malformed JSON, an
// oversized body, a reused Idempotency-Key, the Free plan), then checks every status the shared test
// client has seen in this process against the document. The preloaded check
// (test/support/observed-statuses.ts) repeats the comparison once the whole run is over.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { EVENT_TYPES } from '../../src/modules/events/outbox'
import { ADMIN_TOKEN, observed, scopedToken, startHarness, type Harness } from '../support/harness'
import { undocumented } from '../support/status-coverage'

setDefaultTimeout(120_000)

let h: Harness
let doc: any
let full: string
let free: string
let validateOnly: string
let keysRead: string
beforeAll(async () => {
  h = await startHarness()
  full = (await h.account('enterprise')).token
  free = (await h.account('free')).token
  validateOnly = await scopedToken(h.call, full, 'validate')
  keysRead = await scopedToken(h.call, full, 'keys:read')
  doc = (await h.call('GET', '/docs/json')).body
}, 60_000)
afterAll(() => h.close())

const METHODS = ['get', 'post', 'put', 'patch', 'delete']
const operations = () =>
  Object.entries<Record<string, any>>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  )

/** A concrete path: each `{param}` becomes an id that exists nowhere. */
const concrete = (path: string) => path.replace(/\{[^}]+\}/g, 'nope_01JD7Z3X9K8Q4W2E6R5T1Y0U3I')
const withBody = (method: string) => method === 'POST' || method === 'PUT' || method === 'PATCH'
const ownerOf = (path: string) => (path.startsWith('/admin/') ? ADMIN_TOKEN : full)
/** A token that authenticates but whose scope the operation refuses (validate routes take keys:read). */
const wrongScope = (path: string) => (path === '/v1/validate' || path === '/v1/deactivate' || path === '/v1/devices' ? keysRead : validateOnly)

/** Bodies that pass each operation's schema, so an unknown id reaches the handler (404, not 400). */
const VALID_BODY: Record<string, unknown> = {
  'POST /admin/accounts': { name: 'probe' },
  'POST /v1/products': { name: 'probe', slug: 'probe' },
  'POST /v1/keys': { product_id: 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I' },
  'POST /v1/policies': { product_id: 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I', name: 'probe' },
  'POST /v1/keys/{id}/extend': { expires_at: null },
  'POST /v1/keys/{id}/offline-licenses': { device_fingerprint: 'a'.repeat(64) },
  'POST /v1/api-keys': { name: 'probe', scope: 'validate' },
  'POST /v1/webhooks': { url: 'https://example.com/hook', events: ['key.created'] },
  'POST /v1/validate': { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', device_fingerprint: 'a'.repeat(64) },
  'POST /v1/deactivate': { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', device_fingerprint: 'a'.repeat(64) },
  'POST /v1/devices': { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' },
  'POST /v1/offline-licenses/sync': { licenses: ['not a license'] },
  'POST /v1/keys/import': { rows: [{ key: 'probe-value-1', product_id: 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I' }] },
}

/** The create routes that take an Idempotency-Key, each with a second body that differs in a schema field. */
const IDEMPOTENT: Record<string, unknown> = {
  'POST /v1/keys': { product_id: 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3J' },
  'POST /v1/products': { name: 'probe', slug: 'probe-two' },
  'POST /v1/webhooks': { url: 'https://example.com/hook', events: ['key.revoked'] },
  'POST /v1/api-keys': { name: 'probe two', scope: 'validate' },
  'POST /v1/keys/{id}/offline-licenses': { device_fingerprint: 'b'.repeat(64) },
  'POST /v1/policies': { product_id: 'prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3J', name: 'probe two' },
  'POST /v1/keys/import': { rows: [] },
  'POST /v1/signing-keys': { activate_at: null },
}

test('each operation, driven through every error class it can meet', async () => {
  expect(operations().length).toBeGreaterThan(30)
  // Checked at the end, so one surprise does not hide the operations after it.
  const surprises: string[] = []
  const want = (key: string, probe: string, got: number, allowed: number[]) => {
    if (!allowed.includes(got)) surprises.push(`${key} ${probe}: ${got}, expected ${allowed.join(' or ')}`)
  }
  for (const { method, path, op } of operations()) {
    const at = concrete(path)
    const key = `${method} ${path}`
    const body = VALID_BODY[key] ?? (withBody(method) ? {} : undefined)
    const call = (opts: Parameters<Harness['call']>[2]) => h.call(method, at, opts)

    // NUL in the query: 400 (the kernel refuses it before routing), except where the query is never
    // read: liveness, and validate's own door.
    const nul = await h.call(method, `${at}?q=%00`, { token: ownerOf(path), body })
    if (path === '/healthz') want(key, 'NUL in the query', nul.status, [200])

    if (op.security) {
      want(key, 'no token', (await call({ token: null, body })).status, [401])
      if (!path.startsWith('/admin/')) await call({ token: wrongScope(path), body })
    }
    // The owner with an unknown id (and a valid body where one is needed).
    await call({ token: ownerOf(path), body })
    if (withBody(method)) {
      const json = { 'content-type': 'application/json' }
      // A relay's check-in checks its signature before it reads the body: unsigned, even broken JSON is 401.
      const checkIn = path === '/v1/relays/{id}/check-in'
      want(key, 'malformed JSON', (await call({ token: ownerOf(path), raw: '{"broken": ', headers: json })).status, checkIn ? [401] : [400])
      // Every route takes 64 KiB but the offline sync, which takes 256 KiB (100 licenses), a payment
      // provider's webhook, 1 MiB, the key import, 8 MiB, and a relay's check-in, 4 MiB.
      const limit =
        path === '/v1/offline-licenses/sync' ? 256 * 1024 : path.startsWith('/hooks/') ? 1024 * 1024 : path === '/v1/keys/import' ? 8 * 1024 * 1024 : checkIn ? 4 * 1024 * 1024 : 64 * 1024
      const big = await call({ token: ownerOf(path), raw: JSON.stringify({ pad: 'x'.repeat(limit + 6_000) }), headers: json })
      want(key, 'a body over its limit', big.status, [413])
    }
    if (key in IDEMPOTENT) {
      const idem = { 'idempotency-key': `probe-${Math.random()}` }
      await call({ token: full, body, headers: idem })
      const reused = await call({ token: full, body: IDEMPOTENT[key], headers: idem })
      want(key, 'a reused Idempotency-Key', reused.status, [409])
      want(key, 'an Idempotency-Key of 256 characters', (await call({ token: full, body, headers: { 'idempotency-key': 'k'.repeat(256) } })).status, [400])
    }
    if (path.startsWith('/v1/analytics/')) want(key, 'the Free plan', (await call({ token: free, body })).status, [402])
  }
  expect(surprises).toEqual([])
})

test('every status observed on an operation (in this file and every file before it) is documented', () => {
  const missing = undocumented(doc, observed.calls)
  if (missing.length > 0) console.log(`undocumented statuses:\n  ${missing.join('\n  ')}`)
  expect(missing).toEqual([])
})

test('headers, servers and webhook payloads are documented (docs/api.md, "Operations" and "CORS")', () => {
  const resolve = (res: any) => (res.$ref ? doc.components.responses[res.$ref.split('/').pop()] : res)
  for (const { method, path, op } of operations()) {
    const params = (op.parameters ?? []).map((p: any) => p.$ref ?? p.name)
    expect(params).toContain('#/components/parameters/RequestId')
    expect(params.includes('#/components/parameters/IdempotencyKey')).toBe(`${method} ${path}` in IDEMPOTENT)
    if (op.requestBody) expect(Object.keys(op.responses)).toContain('413')
    for (const [status, res] of Object.entries<any>(op.responses)) {
      const headers = resolve(res).headers ?? {}
      expect(Object.keys(headers)).toContain('X-Request-Id')
      if (status === '429') expect(Object.keys(headers)).toContain('Retry-After')
      if (`${method} ${path}` in IDEMPOTENT && status.startsWith('2')) expect(Object.keys(headers)).toContain('Idempotent-Replayed')
    }
  }
  expect(doc.servers.length).toBeGreaterThan(0)
  // One payload per event type a webhook can subscribe to.
  expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES].sort())
  const keyCreated = doc.webhooks['key.created'].post.requestBody.content['application/json'].schema
  expect(keyCreated.required).toEqual(['id', 'type', 'timestamp', 'actor', 'data'])
  expect(keyCreated.properties.data.properties.key_prefix).toBeDefined()
})

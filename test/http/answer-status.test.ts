// The access log and the latency metric record the status the client received (issue: 401, 402, 403,
// 404, 409 and 422 were logged as 500, a schema 400 as 422, a 413 and an unknown route's 404 as 200),
// for every kind of answer and every door: the validate fast path, the routes Elysia serves, the
// framework's own answers (schema 400, auth 401/403, unknown route 404, the kernel's 413, a 503), and
// the answers the client-route wrapper makes itself (a preflight, a malformed nonce, an oversized body).
// Each request carries its own X-Request-Id: its log line is found by it, and of the metric series of
// the line's method and route, the one that grew during it must be the line's status.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger, type Logger } from '../../src/infra/log'
import { httpDuration } from '../../src/infra/metrics'
import { startNode, type Node } from '../../src/node'
import { ADMIN_TOKEN, createAccount, client, fingerprint, freshDatabase, newKey, newProduct, scopedToken, testConfig, type TestDb } from '../support/harness'
import { rawRequest } from '../support/raw-http'

setDefaultTimeout(120_000)

let db: TestDb
let node: Node
let log: Logger
let file: string
beforeAll(async () => {
  db = await freshDatabase()
  file = join(mkdtempSync(join(tmpdir(), 'keyward-answer-status-')), 'log.jsonl')
  log = createLogger('info', file)
  node = await startNode(testConfig({}, db.url), { db: db.url ? undefined : await db.open(), log })
}, 180_000)
afterAll(async () => {
  await node?.stop()
  await db?.drop()
})

/** `method route status` → observations so far, from the histogram (the fast path's folded in first). */
async function counts(): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  for (const v of (await httpDuration.get()).values) {
    if (v.metricName !== 'keyward_http_request_duration_seconds_count') continue
    out.set(`${v.labels.method} ${v.labels.route} ${v.labels.status}`, v.value)
  }
  return out
}

/** The access-log line of `requestId`, once written (the fast path's lines are batched). */
async function lineOf(requestId: string): Promise<Record<string, any>> {
  for (let i = 0; i < 300; i++) {
    node.deps.accessLog.flush()
    log.flush()
    if (existsSync(file)) {
      for (const text of readFileSync(file, 'utf8').split('\n')) {
        if (!text.includes(requestId)) continue
        const line = JSON.parse(text)
        if (line.request_id === requestId && line.status !== undefined) return line
      }
    }
    await Bun.sleep(10)
  }
  throw new Error(`no access-log line for ${requestId}`)
}

let n = 0
const seen: string[] = []

/** Sends one request (through `send`), then checks that log line, metric and response agree. */
async function check(kind: string, expected: number, send: (requestId: string) => Promise<number>) {
  const requestId = `req-status-${++n}`
  const before = await counts()
  const status = await send(requestId)
  const line = await lineOf(requestId)
  const after = await counts()
  // The series of this request's method and route that grew (a late set-up request elsewhere cannot interfere).
  const grown = [...after]
    .filter(([k, v]) => k.startsWith(`${line.method} ${line.route} `) && v !== (before.get(k) ?? 0))
    .map(([k, v]) => `${k} +${v - (before.get(k) ?? 0)}`)
  expect({ kind, response: status, logged: line.status, metric: grown }).toEqual({
    kind,
    response: expected,
    logged: expected,
    metric: [`${line.method} ${line.route} ${expected} +1`],
  })
  seen.push(`${kind} ${status}`)
}

test('every answer kind: the log line, the metric label and the response carry the same status', async () => {
  const call = client(node.url)
  const { token } = await createAccount(call, 'growth')
  const free = await createAccount(call, 'free')
  const keysRead = await scopedToken(call, token, 'keys:read')
  const product = await newProduct(call, token)
  const key = await newKey(call, token, product.id)
  const freeKey = await newKey(call, free.token, (await newProduct(call, free.token)).id)
  const port = Number(new URL(node.url).port)
  const json = { 'content-type': 'application/json' }

  const req = (method: string, path: string, opts: { token?: string; body?: string; headers?: Record<string, string> } = {}) =>
    async (requestId: string) => {
      const headers: Record<string, string> = { ...json, ...opts.headers, 'x-request-id': requestId }
      if (opts.token) headers.authorization = `Bearer ${opts.token}`
      const res = await fetch(node.url + path, { method, headers, body: opts.body })
      await res.arrayBuffer()
      return res.status
    }
  const validate = (body: unknown, t = token) => ({ token: t, body: JSON.stringify(body) })
  const device = { key: key.key_value, device_fingerprint: fingerprint() }
  const huge = JSON.stringify({ key: 'x'.repeat(70 * 1024) })
  const nonce = { 'keyward-nonce': 'status-check-nonce-0123456789' }

  const validator = await scopedToken(call, token, 'validate')
  // The set-up requests' lines (and observations) are written after their answers: wait for one more.
  let settled = 0
  const settle = async () => {
    const id = `req-status-settle-${++settled}`
    await (await fetch(`${node.url}/healthz`, { headers: { 'x-request-id': id } })).arrayBuffer()
    await lineOf(id)
  }
  await settle()

  // The validate fast path (Bun's router).
  await check('fast path: valid', 200, req('POST', '/v1/validate', validate(device)))
  await check('fast path: signed', 200, req('POST', '/v1/validate', { ...validate(device), headers: nonce }))
  await check('fast path: schema', 400, req('POST', '/v1/validate', validate({ key: key.key_value })))
  await check('fast path: not JSON', 400, req('POST', '/v1/validate', { token, body: '{"key":' }))
  await check('fast path: malformed nonce', 400, req('POST', '/v1/validate', { ...validate(device), headers: { 'keyward-nonce': 'short' } }))
  await check('fast path: no token', 401, req('POST', '/v1/validate', { body: JSON.stringify(device) }))
  await check('fast path: scope', 403, req('POST', '/v1/validate', validate(device, keysRead)))
  await check('fast path: too large', 413, req('POST', '/v1/validate', { token, body: huge }))

  // Routes Elysia serves, and the framework's own answers.
  await check('list', 200, req('GET', '/v1/products', { token }))
  const slug = `s-${Date.now().toString(36)}`
  await check('create', 201, req('POST', '/v1/products', { token, body: JSON.stringify({ name: slug, slug }) }))
  await check('schema', 400, req('POST', '/v1/products', { token, body: '{}' }))
  await check('not JSON', 400, req('POST', '/v1/products', { token, body: '{"name":' }))
  await check('NUL in the query', 400, req('GET', '/v1/products?q=%00', { token }))
  await check('no token', 401, req('GET', '/v1/products'))
  await check('plan', 402, req('GET', '/v1/analytics/overview', { token: free.token }))
  await check('scope', 403, req('GET', '/v1/keys', { token: validator }))
  await check('unknown route', 404, req('GET', '/v1/nope', { token }))
  await check('unknown id', 404, req('GET', '/v1/products/prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I', { token }))
  await check('conflict', 409, req('POST', '/v1/products', { token, body: JSON.stringify({ name: slug, slug }) }))
  await check('too large', 413, req('POST', '/v1/products', { token, body: huge }))
  await check('product with keys', 422, req('DELETE', `/v1/products/${product.id}`, { token }))
  await check('empty product deleted', 204, req('DELETE', `/v1/products/${(await newProduct(call, token)).id}`, { token }))
  await check('admin', 200, req('GET', '/admin/accounts', { token: ADMIN_TOKEN }))

  // Client routes served by Elysia, and the wrapper's own answers.
  await check('deactivate', 200, req('POST', '/v1/deactivate', validate(device)))
  await check('deactivate signed', 200, req('POST', '/v1/deactivate', { ...validate(device), headers: nonce }))
  await check('devices: unknown key', 404, req('POST', '/v1/devices', { token, body: JSON.stringify({ key: 'NOPE0-NOPE0-NOPE0-NOPE0-NOPE0' }) }))
  await check('validate, framework door', 200, req('POST', '/v1/validate/', validate(device)))
  await check('preflight', 204, req('OPTIONS', '/v1/validate', { headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } }))
  await check('preflight, framework route', 204, req('OPTIONS', '/v1/devices'))
  await check('malformed nonce, framework route', 400, req('POST', '/v1/deactivate', { ...validate(device), headers: { 'keyward-nonce': 'short' } }))
  await check('oversized chunked body with a nonce', 413, async (requestId) => {
    const text = JSON.stringify({ key: 'x'.repeat(70 * 1024) })
    const chunked = `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`
    const head = ['POST /v1/deactivate HTTP/1.1', `Host: 127.0.0.1:${port}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json',
      'Transfer-Encoding: chunked', `Keyward-Nonce: ${nonce['keyward-nonce']}`, `X-Request-Id: ${requestId}`]
    return (await rawRequest(port, head, chunked)).status
  })

  // The daily limit, on both doors.
  for (let i = 0; i < 500; i++) await node.deps.counters.take(free.id, 500)
  await settle()
  const limited = { key: freeKey.key_value, device_fingerprint: fingerprint() }
  await check('fast path: rate limited', 429, req('POST', '/v1/validate', validate(limited, free.token)))
  await check('framework door: rate limited', 429, req('POST', '/v1/validate/', validate(limited, free.token)))

  // Postgres gone: a caller not in memory yet cannot be authenticated (503), on both doors.
  const late = await scopedToken(call, token, 'full_access')
  const lateValidator = await scopedToken(call, token, 'validate')
  await settle()
  await node.deps.sql.end({ timeout: 1 })
  await check('unavailable', 503, req('GET', '/v1/products', { token: late }))
  await check('fast path: unavailable', 503, req('POST', '/v1/validate', validate(device, lateValidator)))

  expect(seen.length).toBe(n)
})

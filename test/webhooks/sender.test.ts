// One attempt over HTTP: redirects are not followed, the timeout holds, error text is bounded.
import { afterAll, expect, test } from 'bun:test'
import { send, MAX_ERROR } from '../../src/modules/webhooks/sender'
import { signEvent } from '../../src/modules/webhooks/signer'
import { freePort } from './processes'

const hits: string[] = []
const server = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  async fetch(req) {
    const path = new URL(req.url).pathname
    hits.push(path)
    if (path === '/redirect') return new Response(null, { status: 307, headers: { location: '/target' } })
    if (path === '/slow') await Bun.sleep(1_000)
    if (path === '/huge') return new Response('E'.repeat(100_000), { status: 500 })
    if (path === '/nul') return new Response('bad\u0000body', { status: 500 })
    return new Response('ok')
  },
})
afterAll(() => server.stop(true))

const message = signEvent('whsec_' + Buffer.alloc(32, 7).toString('base64'), {
  id: 'evt_01JD7Z3X9K8Q4W2E6R5T1Y0U3I',
  type: 'key.created',
  createdAt: new Date(),
  actor: { type: 'system', id: null },
  data: {},
})
const opts = { allowPrivate: true, timeoutMs: 2_000 }
const url = (path: string) => `http://127.0.0.1:${server.port}${path}`

test('a redirect is a failed attempt and is not followed', async () => {
  const outcome = await send(url('/redirect'), message, opts)
  expect(outcome).toMatchObject({ statusCode: 307, success: false, error: 'HTTP 307: redirect not followed' })
  expect(hits.filter((p) => p === '/target')).toHaveLength(0)
})

test('the attempt times out after WEBHOOK_TIMEOUT_MS', async () => {
  const outcome = await send(url('/slow'), message, { ...opts, timeoutMs: 150 })
  expect(outcome).toMatchObject({ statusCode: null, success: false, error: 'timed out after 150 ms' })
  expect(outcome.durationMs).toBeGreaterThanOrEqual(140)
})

test('error text is bounded', async () => {
  const outcome = await send(url('/huge'), message, opts)
  expect(outcome.statusCode).toBe(500)
  expect(outcome.error!.length).toBeLessThanOrEqual(MAX_ERROR)
  expect(outcome.error).toStartWith('HTTP 500: EEEE')
})

test('a closed port is a failed attempt without a status', async () => {
  const outcome = await send(`http://127.0.0.1:${freePort()}/`, message, opts)
  expect(outcome.statusCode).toBeNull()
  expect(outcome.success).toBe(false)
  expect(outcome.error).toBeTruthy()
})

test('success: 2xx, no error', async () => {
  expect(await send(url('/ok'), message, opts)).toMatchObject({ statusCode: 200, success: true, error: null })
})

test('a NUL byte in the body does not reach the error text (Postgres text cannot store it)', async () => {
  const outcome = await send(url('/nul'), message, opts)
  expect(outcome).toMatchObject({ statusCode: 500, success: false, error: 'HTTP 500: bad\ufffdbody' })
})

test('an attempt cut short by the shutdown signal says so, and is not a timeout', async () => {
  const shutdown = new AbortController()
  setTimeout(() => shutdown.abort(), 100)
  const outcome = await send(url('/slow'), message, { ...opts, signal: shutdown.signal })
  expect(outcome).toMatchObject({ statusCode: null, success: false, error: 'aborted: node shutting down' })
  expect(outcome.durationMs).toBeLessThan(900)
  // already aborted: nothing is waited for
  expect(await send(url('/slow'), message, { ...opts, signal: shutdown.signal })).toMatchObject({ error: 'aborted: node shutting down' })
})

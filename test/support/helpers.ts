// Assertions and fixtures shared by the route, HTTP-layer and security tests.
import { expect } from 'bun:test'
import { startNode, type Node } from '../../src/node'
import { createLogger } from '../../src/infra/log'
import { client, testConfig, type Client, type Harness, type Reply } from './harness'

/** Timestamps as the API writes them, ids as it mints them, license key values as it issues them. */
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
export const ID = (prefix: string) => new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`)
export const KEY_VALUE = /^([0-9A-HJKMNP-TV-Z]{5}-){4}[0-9A-HJKMNP-TV-Z]{5}$/
/** A create (or operator issue) answer of an API key: the token shown once, with its prefix. */
export const newApiKeyShape = (name: string, scope: string, token: string) => ({
  id: expect.stringMatching(ID('ak')),
  name,
  scope,
  token: expect.stringMatching(/^kw_[A-Za-z0-9]{32}$/),
  token_prefix: token.slice(0, 7),
  created_at: expect.stringMatching(ISO_MS),
  last_used_at: null,
})
export const inDays = (d: number) => new Date(Date.now() + d * 86_400_000).toISOString()

/** An RFC 9457 problem with the contract's fields; `errors` only (and always) on 400. */
export function expectProblem(res: Reply, status: number, code?: string) {
  if (res.status !== status) throw new Error(`expected ${status} ${code ?? ''}, got ${res.status}: ${JSON.stringify(res.body)}`)
  expect(res.headers.get('content-type') ?? '').toStartWith('application/problem+json')
  const body = res.body
  expect(typeof body).toBe('object')
  if (code) expect(body.code).toBe(code)
  expect(body.type).toBe(`https://keyward.dev/errors/${body.code}`)
  expect(body.status).toBe(status)
  expect(typeof body.title).toBe('string')
  expect(typeof body.detail).toBe('string')
  expect(body.request_id).toBe(res.headers.get('x-request-id')!)
  if (status === 400) {
    expect(Array.isArray(body.errors)).toBe(true)
    expect(body.errors.length).toBeGreaterThan(0)
    for (const e of body.errors) {
      expect(typeof e.field).toBe('string')
      expect(typeof e.message).toBe('string')
    }
  } else {
    expect(body.errors).toBeUndefined()
  }
  if (status >= 500) expect(JSON.stringify(body)).not.toMatch(/stack|select |insert |postgres|at \w+ \(/i)
  return body
}

/** Any answer that is not a server error; a refusal must be a well-formed problem. */
export function expectNoServerError(res: Reply, what: string) {
  if (res.status >= 500) throw new Error(`${what} → ${res.status} ${JSON.stringify(res.body)}`)
  if (res.status >= 400) expectProblem(res, res.status)
}

export async function eventsOf(h: Harness, accountId: string, type?: string): Promise<{ type: string; data: any }[]> {
  const sql = h.node.deps.sql
  return type
    ? sql`select type, data from events where account_id = ${accountId} and type = ${type} order by seq`
    : sql`select type, data from events where account_id = ${accountId} order by seq`
}

/** Records an activation directly (validation is another module; these tests only need the rows). */
export async function insertActivation(
  h: Harness,
  key: { id: string; product_id: string },
  accountId: string,
  opts: { status?: 'active' | 'deactivated'; fingerprint?: string } = {},
): Promise<string> {
  const id = `act_${randomCrockford(26)}`
  const fingerprint = opts.fingerprint ?? randomHex(64)
  const deactivated = opts.status === 'deactivated'
  await h.node.deps.sql`insert into activations (id, account_id, key_id, product_id, device_fingerprint, status, deactivated_at, deactivation_reason)
    values (${id}, ${accountId}, ${key.id}, ${key.product_id}, ${fingerprint}, ${opts.status ?? 'active'},
            ${deactivated ? new Date() : null}, ${deactivated ? 'user' : null})`
  return id
}

export function randomCrockford(n: number): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
  return Array.from({ length: n }, () => alphabet[Math.floor(Math.random() * 32)]).join('')
}

export const randomHex = (n: number) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('')

/** A well-formed id that exists nowhere. */
export const ghostId = (prefix: string) => `${prefix}_${randomCrockford(26)}`

/** A second node on the harness's database with different settings (e.g. no ADMIN_TOKEN). */
export async function secondNode(h: Harness, overrides: Record<string, string | undefined>): Promise<{ node: Node; call: Client; stop(): Promise<void> }> {
  const config = testConfig(overrides, h.db.url)
  const db = h.db.url ? undefined : await h.db.open()
  const node = await startNode(config, { db, log: createLogger('silent') })
  return { node, call: client(node.url), stop: () => node.stop() }
}

/** The environment of a plain embedded start: nothing external, whatever this test run was given. */
export function embeddedEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v
  for (const k of ['DATABASE_URL', 'NATS_URL', 'REDIS_URL', 'SECRET_KEY', 'WORKERS', 'ADMIN_TOKEN', 'DEMO_ACCOUNT', 'PORT', 'HOST', 'DATA_DIR']) delete env[k]
  return { ...env, LOG_LEVEL: 'silent', HOST: '127.0.0.1', PORT: '0', ...extra }
}

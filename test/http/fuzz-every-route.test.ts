// Seeded fuzz of EVERY operation the OpenAPI document lists (read from /docs/json at run time, so a
// route added later is fuzzed without touching this file): malformed bodies, query strings and path
// ids. Whatever comes in, no answer is a 5xx, every refusal is an RFC 9457 problem, and a refusal
// (4xx) writes nothing. The seed is FUZZ_SEED (default 33) and is named in any failure, so a failure
// replays exactly: `FUZZ_SEED=<seed> bun test test/http/fuzz-every-route.test.ts`.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, newKey, newProduct, useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'

setDefaultTimeout(600_000)

const SEED = Number(process.env.FUZZ_SEED ?? 33)
/** Requests per operation: a few of each kind of damage (body, query, path), chosen by the seed. */
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 12)

const h = useHarness()

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
function prng(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Values that are wrong, odd or hostile for almost any field. */
const NASTY: unknown[] = [
  null, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, true, false, '', ' ', '0', '-1', 'null', 'true', '1e400',
  '\u0000', 'a\u0000b', '\ud800', 'x\udc00y', '\u202eevil', '\u001b[31m', 'line\r\nBcc: x@example.com',
  '😀'.repeat(40), "'; drop table accounts; --", '${7*7}{{7*7}}', '../../etc/passwd', '=cmd|"/c calc"!A1',
  'x'.repeat(5_000), '2026-13-45T99:99:99Z', '1970-01-01T00:00:00Z', '9999-12-31T23:59:59Z',
  'prod_00000000000000000000000000', 'key_ZZZZZZZZZZZZZZZZZZZZZZZZZZ', 'a@example.com, b@example.com',
  [], [null], ['a', 1, {}], {}, { a: { b: { c: [1, { d: null }] } } }, { __proto__: { polluted: true } },
  { constructor: { prototype: { polluted: true } } }, Array.from({ length: 200 }, (_, i) => i),
  // text a store cannot hold, one level down (where metadata, entitlements and mappings keep it)
  { note: '\ud800' }, { 'k\udfff': 1 }, { a: ['ok', 'bad\u0000'] }, [{ price: '\ud800', policy_id: 'pol_x' }],
]
/** Whole bodies that are not a JSON object, or not JSON at all. */
const RAW_BODIES = ['null', '[]', '"text"', '42', 'true', '{', '{"a":1,}', "{'a':1}", 'NaN', '{"a":1}{"b":2}', '\u0000', '{"a":"\\ud800"}', `{"a":${'['.repeat(500)}${']'.repeat(500)}}`]
/** Path ids that are no id of this account (or no id at all). */
const BAD_IDS = ['%00', '%ZZ', '%E2%80%AE', '..%2F..%2Fadmin', 'prod_' + '0'.repeat(26), 'x'.repeat(600), "'%20or%201=1--", '%F0%9F%98%80', '-1', '0', 'null', '%20']
/** Query values, already URL-encoded. */
const BAD_QUERY = ['', '%00', '-1', '0', '1e400', 'NaN', 'Infinity', '99999999999999999999', '%E2%80%AE', 'x'.repeat(3_000), '%ZZ', 'true', 'null', '%5B%5D', '2026-13-45', '%ED%A0%80']

type Doc = { paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, Schema>; parameters?: Record<string, Parameter> } }
type Schema = {
  $ref?: string
  type?: string | string[]
  properties?: Record<string, Schema>
  required?: string[]
  anyOf?: Schema[]
  oneOf?: Schema[]
  items?: Schema
  const?: unknown
  enum?: unknown[]
  format?: string
  pattern?: string
  minimum?: number
  minLength?: number
  minItems?: number
}
type Parameter = { $ref?: string; in?: string; name?: string }
type Operation = { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema?: Schema }> }; security?: Record<string, unknown>[] }

let doc: Doc
let token: string
let ids: Record<string, string>

beforeAll(async () => {
  const res = await h.call('GET', '/docs/json')
  expect(res.status).toBe(200)
  doc = res.body
  const account = await h.account('enterprise')
  token = account.token
  // real ids, so some requests get past the lookup to the body's checks
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id)
  const policy = (await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Fuzz' } })).body
  const apiKey = (await h.call('POST', '/v1/api-keys', { token, body: { name: 'fuzz target', scope: 'validate' } })).body
  const connector = (await h.call('POST', '/v1/connectors', { token, body: { provider: 'stripe', name: 'fuzz', signing_secret: 'whsec_fuzz' } })).body
  const other = await h.account()
  ids = { product: product.id, key: key.id, keyValue: key.key_value, policy: policy.id, api: apiKey.id, connector: connector.id, account: other.id }
}, 120_000)

const resolve = <T extends { $ref?: string }>(x: T | undefined): T | undefined => {
  let v: any = x
  for (let i = 0; v?.$ref && i < 10; i++) v = v.$ref.split('/').slice(1).reduce((o: any, k: string) => o?.[k], doc)
  return v
}

/** What the rows of every table a request could write look like: any change shows. */
async function snapshot(): Promise<string> {
  const [row] = await h.node.deps.sql<{ s: string }[]>`select concat_ws('|',
      (select count(*) from accounts), (select count(*) from api_keys), (select count(*) from license_keys),
      (select count(*) from activations), (select count(*) from events), (select count(*) from webhooks),
      (select count(*) from connector_mails), (select count(*) from connector_keys), (select count(*) from offline_licenses),
      (select md5(coalesce(string_agg(t::text, ',' order by t.id), '')) from products t),
      (select md5(coalesce(string_agg(t::text, ',' order by t.id), '')) from policies t),
      (select md5(coalesce(string_agg(t::text, ',' order by t.id), '')) from connectors t),
      (select md5(coalesce(string_agg(t::text, ',' order by t.id), '')) from webhooks t),
      (select md5(coalesce(string_agg(concat_ws(',', t.id, t.status, t.expires_at, t.metadata, t.entitlements, t.plan, t.activation_limit, t.key_hash), ',' order by t.id), '')) from license_keys t)
    ) as s`
  return row!.s
}

function pathFor(template: string, method: string, rand: () => number, bad: boolean): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    // a real id only where success would not spoil the fixtures the other operations use
    const harmless = method !== 'DELETE' && !/rotate|reissue|revoke|suspend/.test(template)
    if (!bad && harmless) {
      if (name === 'connector_id') return ids.connector!
      if (template.startsWith('/admin/accounts')) return ids.account!
      if (template.startsWith('/v1/products')) return ids.product!
      if (template.startsWith('/v1/policies')) return ids.policy!
      if (template.startsWith('/v1/keys')) return name === 'id' ? ids.key! : pick(rand, BAD_IDS)
      if (template.startsWith('/v1/api-keys')) return ids.api!
      if (template.startsWith('/v1/connectors')) return ids.connector!
    }
    return pick(rand, BAD_IDS)
  })
}

const pick = <T>(rand: () => number, list: readonly T[]): T => list[Math.floor(rand() * list.length)]!

/**
 * A value the schema would likely take (real ids for *_id fields), so that one damaged field at a time
 * reaches the checks and the writes behind the schema, not just the schema's first refusal.
 */
function plausible(schema: Schema | undefined, name: string, depth = 0): unknown {
  const s = resolve(schema)
  if (!s || depth > 6) return null
  const alternatives = s.anyOf ?? s.oneOf
  if (alternatives) return plausible(alternatives.find((a) => resolve(a)?.type !== 'null') ?? alternatives[0], name, depth + 1)
  if (s.const !== undefined) return s.const
  if (s.enum) return s.enum[0]
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {}
      // the required fields, and the ids a body names (an optional product_id is how most bodies get anywhere)
      for (const k of Object.keys(s.properties ?? {})) {
        if (s.required?.includes(k) || ['product_id', 'policy_id'].includes(k)) out[k] = plausible(s.properties?.[k], k, depth + 1)
      }
      return out
    }
    case 'array':
      return (s.minItems ?? 0) > 0 ? [plausible(s.items, name, depth + 1)] : []
    case 'integer':
    case 'number':
      return s.minimum ?? 1
    case 'boolean':
      return false
    case 'string': {
      const real: Record<string, string | undefined> = { product_id: ids.product, policy_id: ids.policy, key_id: ids.key }
      if (real[name]) return real[name]
      if (name === 'key') return ids.keyValue
      if (name === 'device_fingerprint') return 'f'.repeat(64)
      if (name === 'url') return 'https://example.com/fuzz'
      if (s.format === 'date-time' || s.pattern?.includes('\\d{4}')) return '2030-01-01T00:00:00Z'
      return `fuzz${Math.floor(Math.random() * 1e6)}`.padEnd(s.minLength ?? 1, 'x')
    }
    default:
      return null
  }
}

function bodyFor(op: Operation, rand: () => number): { raw?: string; body?: unknown; type: string } {
  const content = op.requestBody?.content ?? { 'application/json': {} }
  const type = pick(rand, Object.keys(content))
  if (type !== 'application/json') {
    // text bodies (the import's CSV and NDJSON): broken lines, odd cells, escapes JSON can spell
    const texts = ['\n\n\n', 'key\n=1+1\n', '{"key":"\\ud800"}\n{', 'key,product_id\n"unterminated\n', `key,metadata\nabcdefgh,"{""a"":""\\u0000""}"\n`, '\ufeff\ufeffkey\r\nx\r\n', 'a,b,c\n'.repeat(50)]
    return { raw: pick(rand, texts), type }
  }
  const schema = resolve(content[type]?.schema)
  const props = Object.keys(resolve(schema)?.properties ?? {})
  const roll = rand()
  if (roll < 0.2) return { raw: pick(rand, RAW_BODIES), type }
  const base = plausible(schema, 'body')
  const body: Record<string, unknown> = base !== null && typeof base === 'object' && !Array.isArray(base) ? (base as Record<string, unknown>) : {}
  if (roll < 0.4) for (const p of props) body[p] = pick(rand, NASTY)
  else if (props.length > 0) body[pick(rand, props)] = pick(rand, NASTY)
  if (rand() < 0.3) Object.assign(body, { [pick(rand, ['__proto__', 'constructor', 'x\u0000', '\ud800', 'unknown_field'])]: pick(rand, NASTY) })
  return { body, type }
}

function queryFor(op: Operation, rand: () => number): string {
  const names = (op.parameters ?? []).map((p) => resolve(p)).filter((p) => p?.in === 'query').map((p) => p!.name!)
  const chosen = [...names, 'unknown'].filter(() => rand() < 0.6)
  return chosen.length === 0 ? '' : '?' + chosen.map((n) => `${n}=${pick(rand, BAD_QUERY)}`).join('&')
}

test(`every operation in /docs/json, fuzzed (seed ${SEED}): no 5xx, refusals are problems, a refusal writes nothing`, async () => {
  const rand = prng(SEED)
  const seen = new Set<string>()
  let refused = 0
  for (const [template, ops] of Object.entries(doc.paths)) {
    for (const [lower, op] of Object.entries(ops)) {
      const method = lower.toUpperCase()
      if (!['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].includes(method)) continue
      seen.add(`${method} ${template}`)
      const admin = template.startsWith('/admin')
      const auth = op.security?.length ? (admin ? ADMIN_TOKEN : token) : null
      for (let round = 0; round < ROUNDS; round++) {
        const path = pathFor(template, method, rand, rand() < 0.4) + queryFor(op, rand)
        const sendsBody = method !== 'GET' && method !== 'DELETE' && method !== 'OPTIONS'
        const { raw, body, type } = sendsBody ? bodyFor(op, rand) : { type: 'application/json' }
        const headers: Record<string, string> = sendsBody ? { 'content-type': type } : {}
        if (method === 'OPTIONS') Object.assign(headers, { origin: pick(rand, ['https://app.example', 'null', '']), 'access-control-request-method': 'POST' })
        const what = `seed ${SEED} round ${round}: ${method} ${path.slice(0, 200)} ${(raw ?? JSON.stringify(body) ?? '').slice(0, 200)}`
        const before = await snapshot()
        const res = await h.call(method, path, { token: auth, raw: raw ?? (body === undefined ? undefined : JSON.stringify(body)), headers })
        if (res.status >= 500) throw new Error(`${what} → ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`)
        if (res.status >= 400) {
          refused++
          try {
            expectProblem(res, res.status)
          } catch (err) {
            throw new Error(`${what} → ${res.status} is not a problem document: ${(err as Error).message}`)
          }
          const after = await snapshot()
          if (after !== before) throw new Error(`${what} → ${res.status}, yet something was written`)
        }
      }
    }
  }
  // the document is the list: every kind of route is in it, and most requests were refused
  for (const route of ['POST /v1/keys', 'POST /v1/validate', 'POST /v1/keys/import', 'POST /hooks/{connector_id}', 'PATCH /admin/accounts/{id}']) {
    expect(seen).toContain(route)
  }
  expect(seen.size).toBeGreaterThan(50)
  expect(refused).toBeGreaterThan(seen.size * ROUNDS * 0.5)
})

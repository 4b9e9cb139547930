// /docs/json is a valid OpenAPI 3 document (checked by a real validator) listing every route the app serves.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { CONSOLE_CSP } from '../../src/console/serve'
import { useHarness } from '../support/harness'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })
let doc: any
beforeAll(async () => {
  const res = await h.call('GET', '/docs/json')
  expect(res.status).toBe(200)
  doc = res.body
}, 60_000)

const FOUNDATION_ROUTES = [
  'get /healthz',
  'get /readyz',
  'post /admin/accounts',
  'get /admin/accounts/{id}',
  'patch /admin/accounts/{id}',
  'get /v1/ping',
  'post /v1/api-keys',
  'get /v1/api-keys',
  'post /v1/api-keys/{id}/rotate',
  'delete /v1/api-keys/{id}',
  'post /v1/products',
  'get /v1/products',
  'get /v1/products/{id}',
  'put /v1/products/{id}',
  'delete /v1/products/{id}',
  'post /v1/keys',
  'get /v1/keys',
  'get /v1/keys/{id}',
  'post /v1/keys/{id}/revoke',
  'post /v1/keys/{id}/extend',
]

const documented = () => {
  const ops: string[] = []
  for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    for (const method of Object.keys(item)) if (['get', 'post', 'put', 'patch', 'delete'].includes(method)) ops.push(`${method} ${path}`)
  }
  return ops
}

test('the document validates against the OpenAPI 3 schema', async () => {
  const validator = new Validator()
  const result = await validator.validate(doc)
  if (!result.valid) throw new Error(JSON.stringify(result.errors, null, 2).slice(0, 4000))
  expect(result.valid).toBe(true)
  expect(doc.openapi).toMatch(/^3\./)
  expect(doc.info.title).toBe('Keyward API')
})

test('every route the app serves is documented (and only those)', () => {
  const served = new Set<string>()
  for (const r of h.node.app.routes) {
    // /docs (its page, assets, JSON), the console (/console, its assets) and the air-gapped end-user page (GET /portal/…, its
    // assets; its two POST routes are API routes) are pages for people, not API routes.
    if (r.path === '/docs' || r.path.startsWith('/docs/') || r.path.startsWith('/console') || r.method === 'OPTIONS') continue
    if (r.method === 'GET' && r.path.startsWith('/portal/')) continue
    const path = r.path.replace(/:([^/]+)/g, '{$1}').replace(/(.)\/$/, '$1')
    served.add(`${r.method.toLowerCase()} ${path}`)
  }
  expect(documented().sort()).toEqual([...served].sort())
})

test('every foundation route of the contract is documented, at the contract\'s path', () => {
  const ops = documented()
  for (const route of FOUNDATION_ROUTES) expect(ops).toContain(route)
})

test('each operation: success and error responses, bearer security on /v1 (except none), bodies documented as JSON (the import also as text)', () => {
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      const codes = Object.keys(op.responses ?? {})
      if (!codes.some((c) => c.startsWith('2'))) throw new Error(`${method} ${path} documents no success response`)
      // A CORS preflight is answered before authentication (see the CORS test below).
      if (method === 'options') {
        expect(op.security).toEqual([])
        continue
      }
      // The body limit holds on every route, before routing.
      expect([method, path, codes.includes('413')]).toEqual([method, path, true])
      // A relay's check-in has no token: the relay's signature over the body is its credential.
      if (path.startsWith('/v1/') && path !== '/v1/relays/{id}/check-in') {
        expect(op.security).toEqual([{ bearer: [] }])
        expect(codes).toContain('401')
      }
      if (path.startsWith('/admin/')) expect(op.security).toEqual([{ admin: [] }])
      for (const [code, res] of Object.entries<any>(op.responses)) {
        // Every error is a problem document; /readyz's 503 is its readiness report (application/json).
        if (Number(code) >= 400 && res.content && path !== '/readyz') expect(Object.keys(res.content)).toEqual(['application/problem+json'])
        if (res.$ref) expect(res.$ref).toMatch(/^#\/components\/responses\//)
        if (code === '204') expect(res.content).toBeUndefined()
      }
      if (op.requestBody) {
        // the key import also takes its rows as NDJSON or CSV text
        const types = path === '/v1/keys/import' ? ['application/json', 'application/x-ndjson', 'text/csv'] : ['application/json']
        expect(Object.keys(op.requestBody.content)).toEqual(types)
        expect(op.requestBody.content['application/json'].schema.type).toBe('object')
      }
      if (['post', 'put', 'patch'].includes(method) && /\/(products|keys|api-keys|accounts)(\/\{id\})?$/.test(path)) {
        expect(op.requestBody).toBeDefined()
      }
    }
  }
})

test('CORS: a preflight (OPTIONS) on exactly the client routes, and the CORS headers on every answer of theirs', async () => {
  const CLIENT: Record<string, string> = { '/v1/validate': 'post', '/v1/deactivate': 'post', '/v1/devices': 'post', '/v1/offline/public-key': 'get', '/v1/offline/keys': 'get' }
  const resolve = (res: any) => (res.$ref ? doc.components.responses[res.$ref.split('/').pop()] : res)
  const preflighted = Object.entries<Record<string, any>>(doc.paths).filter(([, item]) => item.options).map(([path]) => path)
  expect(preflighted.sort()).toEqual(Object.keys(CLIENT).sort())
  for (const [path, method] of Object.entries(CLIENT)) {
    const preflight = doc.paths[path].options
    expect(Object.keys(preflight.responses)).toEqual(['204'])
    const headers = preflight.responses['204'].headers
    expect(headers['Access-Control-Allow-Methods'].schema.enum).toEqual([`${method.toUpperCase()}, OPTIONS`])
    expect(headers['Access-Control-Allow-Headers'].schema.enum).toEqual(['authorization, content-type, keyward-nonce, x-request-id'])
    expect(headers['Access-Control-Max-Age'].schema.enum).toEqual(['86400'])
    expect(Object.keys(headers)).toContain('Access-Control-Allow-Origin')
    for (const [status, res] of Object.entries<any>(doc.paths[path][method].responses)) {
      expect([path, status, Object.keys(resolve(res).headers)]).toEqual([path, status, expect.arrayContaining(['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers'])])
    }
  }
  expect(doc.components.headers.AccessControlAllowOrigin.schema.enum).toEqual(['*'])
  expect(doc.components.headers.AccessControlExposeHeaders.schema.enum).toEqual(['keyward-signature, keyward-certificate, x-request-id, retry-after'])
  // No other operation documents a CORS header.
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    if (path in CLIENT) continue
    for (const [method, op] of Object.entries<any>(item)) {
      for (const [status, res] of Object.entries<any>(op.responses)) {
        expect([method, path, status, Object.keys(resolve(res).headers ?? {}).some((n) => n.startsWith('Access-Control-'))]).toEqual([method, path, status, false])
      }
    }
  }
})

test('the activation DELETE documents its 413 (the body limit holds there too)', async () => {
  const op = doc.paths['/v1/keys/{id}/activations/{activation_id}'].delete
  expect(op.responses['413'].$ref).toBe('#/components/responses/PayloadTooLarge')
  const account = await h.account()
  const res = await h.call('DELETE', '/v1/keys/key_x/activations/act_x', {
    token: account.token,
    raw: JSON.stringify({ pad: 'x'.repeat(70 * 1024) }),
    headers: { 'content-type': 'application/json' },
  })
  expect(res.status).toBe(413)
})

test('/docs serves the interactive page', async () => {
  const res = await h.call('GET', '/docs')
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toContain('text/html')
  expect(String(res.body)).toContain('Keyward API')
})

test("every answer under /docs has the console's CSP (same origin, no framing) and nosniff", async () => {
  const page = await h.call('GET', '/docs')
  const script = String(page.body).match(/src="docs\/(assets\/api-reference\.js[^"]*)"/)![1]
  for (const path of ['/docs', '/docs/', '/docs/json', `/docs/${script}`]) {
    const res = await h.call('GET', path)
    expect([path, res.status]).toEqual([path, 200])
    const csp = res.headers.get('content-security-policy') ?? ''
    expect([path, csp]).toEqual([path, expect.stringContaining("frame-ancestors 'none'")])
    for (const directive of ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "object-src 'none'", "base-uri 'none'"]) {
      expect([path, csp.includes(directive)]).toEqual([path, true])
    }
    expect([path, res.headers.get('x-content-type-options')]).toEqual([path, 'nosniff'])
    // The console's policy, but for the styles Scalar injects at run time.
    expect([path, csp]).toEqual([path, CONSOLE_CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")])
  }
})

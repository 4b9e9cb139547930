// /docs/json is a valid OpenAPI 3 document (checked by a real validator) listing every route the app serves.
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { Validator } from '@seriousme/openapi-schema-validator'
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
    // /docs (its page, assets, JSON) and the console (/console, its assets) are pages for people, not API routes.
    if (r.path === '/docs' || r.path.startsWith('/docs/') || r.path.startsWith('/console') || r.method === 'OPTIONS') continue
    const path = r.path.replace(/:([^/]+)/g, '{$1}').replace(/(.)\/$/, '$1')
    served.add(`${r.method.toLowerCase()} ${path}`)
  }
  expect(documented().sort()).toEqual([...served].sort())
})

test('every foundation route of the contract is documented, at the contract\'s path', () => {
  const ops = documented()
  for (const route of FOUNDATION_ROUTES) expect(ops).toContain(route)
})

test('each operation: success and error responses, bearer security on /v1 (except none), bodies documented as JSON', () => {
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      const codes = Object.keys(op.responses ?? {})
      if (!codes.some((c) => c.startsWith('2'))) throw new Error(`${method} ${path} documents no success response`)
      if (path.startsWith('/v1/')) {
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
        expect(Object.keys(op.requestBody.content)).toEqual(['application/json'])
        expect(op.requestBody.content['application/json'].schema.type).toBe('object')
      }
      if (['post', 'put', 'patch'].includes(method) && /\/(products|keys|api-keys|accounts)(\/\{id\})?$/.test(path)) {
        expect(op.requestBody).toBeDefined()
      }
    }
  }
})

test('/docs serves the interactive page', async () => {
  const res = await h.call('GET', '/docs')
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toContain('text/html')
  expect(String(res.body)).toContain('Keyward API')
})

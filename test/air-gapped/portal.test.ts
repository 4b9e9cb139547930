// The end-user page and its two public routes (docs/api.md, "The end-user page"): offline_portal on the
// product, the key inside the code as credential, one 404 for every kind of "no", an Authorization
// header ignored, calls counted in the account's daily quota, the page's strict CSP, and its limits
// per client address and per key (a node of its own, so the other tests' calls do not count).
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, startHarness, useHarness, type Harness } from '../support/harness'
import { expectProblem, ghostId } from '../support/helpers'
import { deactivationCode, licenseOfResponse, newDevice, receiptOf, requestCode } from '../support/air-gapped'
import { offlineAccount, payloadOf, verifiesWith } from '../support/offline'

setDefaultTimeout(60_000)
const h = useHarness()
let acct: { id: string; token: string }
let productId: string
let publicKeyPem: string
beforeAll(async () => {
  ;({ acct, productId, publicKeyPem } = await offlineAccount(h))
  const on = await h.call('PUT', `/v1/products/${productId}`, { token: acct.token, body: { offline_portal: true } })
  expect(on.status).toBe(200)
}, 60_000)

const portal = (product: string, path: 'activations' | 'deactivations', body: unknown, headers?: Record<string, string>) =>
  h.call('POST', `/portal/${product}/offline/${path}`, { body, headers })
const NOT_FOUND = { status: 404, code: 'not_found', title: 'Not found', detail: 'Not found' }
const expectPortal404 = (res: any) => {
  expectProblem(res, 404, 'not_found')
  expect(res.body).toMatchObject(NOT_FOUND)
}

describe('offline_portal on the product', () => {
  test('false by default, in the object and in PUT; an event when it changes', async () => {
    const p = await newProduct(h.call, acct.token)
    expect(p.offline_portal).toBe(false)
    const on = await h.call('PUT', `/v1/products/${p.id}`, { token: acct.token, body: { offline_portal: true } })
    expect(on.body.offline_portal).toBe(true)
    expect((await h.call('GET', `/v1/products/${p.id}`, { token: acct.token })).body.offline_portal).toBe(true)
    const renamed = await h.call('PUT', `/v1/products/${p.id}`, { token: acct.token, body: { name: 'Renamed' } })
    expect(renamed.body.offline_portal).toBe(true) // kept when not sent
    const off = await h.call('PUT', `/v1/products/${p.id}`, { token: acct.token, body: { offline_portal: false } })
    expect(off.body.offline_portal).toBe(false)
    const events = await h.node.deps.sql`select data from events where type = 'product.updated' and data->>'id' = ${p.id} order by seq`
    expect(events.map((e: any) => e.data.offline_portal)).toEqual([true, true, false])
    expectProblem(await h.call('PUT', `/v1/products/${p.id}`, { token: acct.token, body: { offline_portal: 'yes' } }), 400, 'invalid_request')
  })
})

describe('the page', () => {
  test('served with a strict CSP, the product name escaped, its assets from this origin only', async () => {
    const p = await newProduct(h.call, acct.token)
    await h.call('PUT', `/v1/products/${p.id}`, { token: acct.token, body: { offline_portal: true, name: 'Acme <CAD> & "Co"' } })
    const res = await fetch(`${h.node.url}/portal/${p.id}/offline`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toContain('text/html')
    const csp = res.headers.get('content-security-policy')!
    expect(csp).toContain("default-src 'self'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("connect-src 'self'")
    expect(csp).not.toContain('unsafe-inline')
    expect(res.headers.get('referrer-policy')).toBe('no-referrer')
    const html = await res.text()
    expect(html).toContain('Acme &#60;CAD&#62; &#38; &#34;Co&#34;')
    expect(html).not.toContain('<CAD>')
    // no reference to another origin; scripts and styles from /portal/assets/
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//)
    const assets = [...html.matchAll(/(?:src|href)="(\/portal\/assets\/[^"]+)"/g)].map((m) => m[1]!)
    expect(assets.length).toBeGreaterThanOrEqual(2)
    for (const a of assets) {
      const asset = await fetch(`${h.node.url}${a}`)
      expect(asset.status).toBe(200)
      expect(asset.headers.get('content-security-policy')).toBe(csp)
      const text = await asset.text()
      expect(text).not.toMatch(/https?:\/\/(?!www\.w3\.org)[a-z0-9.-]+\.[a-z]{2,}\//i) // no absolute URL to fetch from (the SVG namespace is a name, not a request)
    }
    expect((await fetch(`${h.node.url}/portal/assets/nope.js`)).status).toBe(404)
  })

  test('a disabled or unknown product: 404, the same as any unknown path', async () => {
    const off = await newProduct(h.call, acct.token)
    for (const id of [off.id, ghostId('prod'), 'nonsense', 'x'.repeat(300)]) {
      const res = await fetch(`${h.node.url}/portal/${id}/offline`)
      expect(res.status).toBe(404)
      await res.text()
    }
  })
})

describe('the routes', () => {
  test('activation and deactivation with no Authorization; a header sent is ignored', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const device = newDevice()
    const { code, nonce } = requestCode(device, key.key_value)
    const res = await portal(productId, 'activations', { request: code }, { authorization: 'Bearer nonsense' })
    expect(res.status).toBe(201)
    const license = licenseOfResponse(res.body.response)
    expect(verifiesWith(publicKeyPem, license)).toBe(true)
    const payload = payloadOf(license)
    expect(payload.request_nonce).toBe(nonce)
    const again = await portal(productId, 'activations', { request: code })
    expect(again.status).toBe(200)
    expect(again.body.activation_id).toBe(res.body.activation_id)
    // the same code through the API door: the same seat
    const api = await h.call('POST', '/v1/offline/activations', { token: acct.token, body: { request: code } })
    expect(api.status).toBe(200)
    expect(api.body.activation_id).toBe(res.body.activation_id)

    const dea = deactivationCode(device, { license_id: payload.id, activation_id: res.body.activation_id })
    const out = await portal(productId, 'deactivations', { code: dea }, { authorization: `Bearer ${acct.token}x` })
    expect(out.status).toBe(200)
    expect(receiptOf(out.body.receipt).body.activation_id).toBe(res.body.activation_id)
  })

  test('unknown key, disabled portal, unknown product, key of another product: the same 404', async () => {
    const key = await newKey(h.call, acct.token, productId)
    const off = await newProduct(h.call, acct.token)
    const otherKey = await newKey(h.call, acct.token, off.id)
    const other = await h.account()
    const foreignProduct = (await newProduct(h.call, other.token)).id
    await h.call('PUT', `/v1/products/${foreignProduct}`, { token: other.token, body: { offline_portal: true } })
    const cases = [
      portal(productId, 'activations', { request: requestCode(newDevice(), 'ABCDE-FGHJK-MNPQR-STVWX-YZ012').code }), // unknown key
      portal(productId, 'activations', { request: requestCode(newDevice(), 'not a key at all').code }),
      portal(off.id, 'activations', { request: requestCode(newDevice(), otherKey.key_value).code }), // disabled portal
      portal(ghostId('prod'), 'activations', { request: requestCode(newDevice(), key.key_value).code }), // unknown product
      portal('garbage', 'activations', { request: requestCode(newDevice(), key.key_value).code }),
      portal(productId, 'activations', { request: requestCode(newDevice(), otherKey.key_value).code }), // another product's key
      portal(foreignProduct, 'activations', { request: requestCode(newDevice(), key.key_value).code }), // another account's product
      portal(off.id, 'deactivations', { code: 'KWDEA1.x.y' }),
    ]
    const answers = await Promise.all(cases)
    for (const a of answers) expectPortal404(a)
    const shapes = new Set(answers.map((a) => JSON.stringify({ ...a.body, request_id: null })))
    expect(shapes.size).toBe(1)
    const [{ n }] = await h.node.deps.sql`select count(*)::int as n from activations where key_id in ${h.node.deps.sql([key.id, otherKey.id])}`
    expect(n).toBe(0)
  })

  test("a deactivation code of another product's seat is invalid there", async () => {
    const other = await newProduct(h.call, acct.token)
    await h.call('PUT', `/v1/products/${other.id}`, { token: acct.token, body: { offline_portal: true } })
    const key = await newKey(h.call, acct.token, other.id)
    const device = newDevice()
    const res = await portal(other.id, 'activations', { request: requestCode(device, key.key_value).code })
    expect(res.status).toBe(201)
    const dea = deactivationCode(device, { license_id: payloadOf(licenseOfResponse(res.body.response)).id, activation_id: res.body.activation_id })
    expectProblem(await portal(productId, 'deactivations', { code: dea }), 400, 'invalid_deactivation')
    expect((await portal(other.id, 'deactivations', { code: dea })).body.released).toBe(true)
  })

  test('refusals other than an unknown key are answered as validate answers them', async () => {
    const key = await newKey(h.call, acct.token, productId, { activation_limit: 1 })
    expect((await portal(productId, 'activations', { request: requestCode(newDevice(), key.key_value).code })).status).toBe(201)
    const full = await portal(productId, 'activations', { request: requestCode(newDevice(), key.key_value).code })
    expect(full.status).toBe(200)
    expect(full.body).toEqual({ valid: false, reason: 'activation_limit' })
  })

  test('bad input: 400 naming the field, before any work', async () => {
    expectProblem(await portal(productId, 'activations', {}), 400, 'invalid_request')
    const nonce = await portal(productId, 'activations', { request: requestCode(newDevice(), 'K', { nonce: 'short' }).code })
    expectProblem(nonce, 400, 'invalid_request')
    expect(nonce.body.errors[0].field).toBe('request.nonce')
    expectProblem(await portal(productId, 'activations', { request: 'x'.repeat(5000) }), 400, 'invalid_request')
    expectProblem(await portal(productId, 'deactivations', { code: 7 }), 400, 'invalid_request')
    expectProblem(await portal(productId, 'deactivations', { code: 'KWDEA1.x.y' }), 400, 'invalid_deactivation')
    const big = await h.call('POST', `/portal/${productId}/offline/activations`, { raw: JSON.stringify({ request: 'x'.repeat(70_000) }), headers: { 'content-type': 'application/json' } })
    expectProblem(big, 413, 'payload_too_large')
  })

  test("calls count in the account's daily quota", async () => {
    const key = await newKey(h.call, acct.token, productId)
    const before = await h.node.deps.counters.today(acct.id)
    await portal(productId, 'activations', { request: requestCode(newDevice(), key.key_value).code })
    await portal(productId, 'activations', { request: requestCode(newDevice(), 'ABCDE-FGHJK-MNPQR-STVWX-YZ012').code })
    expect(await h.node.deps.counters.today(acct.id)).toBe(before + 2)
  })
})

describe('limits', () => {
  let n: Harness
  let token: string
  let product: string
  beforeAll(async () => {
    n = await startHarness()
    const a = await n.account('growth')
    token = a.token
    product = (await newProduct(n.call, token)).id
    await n.call('PUT', `/v1/products/${product}`, { token, body: { offline_portal: true } })
  }, 120_000)

  test('20 an hour per key, 60 a minute per client address: 429 with Retry-After, before Postgres', async () => {
    const key = await newKey(n.call, token, product, { activation_limit: 100 })
    const call = (body: unknown) => n.call('POST', `/portal/${product}/offline/activations`, { body })
    const byKey = []
    for (let i = 0; i < 21; i++) byKey.push(await call({ request: requestCode(newDevice(), key.key_value).code }))
    expect(byKey.slice(0, 20).every((r) => r.status === 201)).toBe(true)
    expectProblem(byKey[20]!, 429, 'rate_limited')
    expect(Number(byKey[20]!.headers.get('retry-after'))).toBeGreaterThan(60)
    const [{ c }] = await n.node.deps.sql`select count(*)::int as c from activations where key_id = ${key.id}`
    expect(c).toBe(20)
    // another key still passes, until the address has made 60 calls in the minute
    const other = await newKey(n.call, token, product, { activation_limit: 100 })
    let answers = 21
    let limited = null
    while (answers < 70 && limited === null) {
      const r = await call({ request: requestCode(newDevice(), 'ABCDE-FGHJK-MNPQR-STVWX-YZ01' + (answers % 10)).code })
      answers++
      if (r.status === 429) limited = r
      else expect(r.status).toBe(404)
    }
    expect(limited).not.toBeNull()
    expect(answers).toBeGreaterThanOrEqual(60)
    expect(answers).toBeLessThanOrEqual(62)
    expectProblem(limited!, 429, 'rate_limited')
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    // the page and the other route share the address's limit
    expect((await fetch(`${n.node.url}/portal/${product}/offline`)).status).toBe(429)
    expectProblem(await n.call('POST', `/portal/${product}/offline/deactivations`, { body: { code: 'x' } }), 429, 'rate_limited')
    void other
  })

  test('cleanup', async () => {
    await n.close()
  })
})

// Names and versions a person reads back in a terminal (a log, a CLI listing) refuse control characters
// as device_name does: account, product, policy and API-key names, and validate's app_version on both doors.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { ADMIN_TOKEN, appClient, newKey, newProduct, useHarness, type Client } from '../support/harness'

setDefaultTimeout(60_000)

const h = useHarness({ socket: true })

/** What a terminal would interpret: ESC sequences, CR, LF, DEL, C0 and C1 (CSI), plus what cannot be stored. */
const BAD = ['\u001b[31mred\u001b[0m', 'carriage\rreturn', 'line\nfeed', 'del\u007f', 'nul\u0000', 'tab\there', 'c1\u0085', 'csi\u009b2J', 'lone \ud800 surrogate']
const GOOD = ['Photo Pro', 'Ålesund Café', 'ノートパソコン', 'no\u00a0break', '😀 emoji']

async function expectRefused(call: Client, method: string, path: string, token: string, body: Record<string, unknown>, field: string) {
  const res = await call(method, path, { token, body })
  expect({ path, value: body, status: res.status }).toEqual({ path, value: body, status: 400 })
  expect(res.headers.get('content-type')).toContain('application/problem+json')
  expect(res.body.code).toBe('invalid_request')
  expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field)
}

test('account names: create and rename refuse control characters', async () => {
  const { id } = await h.account()
  for (const name of BAD) {
    await expectRefused(h.call, 'POST', '/admin/accounts', ADMIN_TOKEN, { name, plan: 'free' }, 'body.name')
    await expectRefused(h.call, 'PATCH', `/admin/accounts/${id}`, ADMIN_TOKEN, { name }, 'body.name')
  }
  for (const name of GOOD) {
    expect((await h.call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name, plan: 'free' } })).status).toBe(201)
    const renamed = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { name } })
    expect(renamed.status).toBe(200)
    expect(renamed.body.name).toBe(name)
  }
})

test('product names: create and update refuse control characters', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  for (const name of BAD) {
    await expectRefused(h.call, 'POST', '/v1/products', token, { name, slug: `s-${Math.random().toString(36).slice(2, 8)}` }, 'body.name')
    await expectRefused(h.call, 'PUT', `/v1/products/${product.id}`, token, { name }, 'body.name')
  }
  for (const name of GOOD) {
    const res = await h.call('PUT', `/v1/products/${product.id}`, { token, body: { name } })
    expect(res.status).toBe(200)
    expect(res.body.name).toBe(name)
  }
  const listed = await h.call('GET', '/v1/products', { token })
  expect(listed.body.data.map((p: { name: string }) => p.name)).toEqual([GOOD.at(-1)])
})

test('policy names: create and update refuse control characters', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const policy = (await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Pro' } })).body
  for (const name of BAD) {
    await expectRefused(h.call, 'POST', '/v1/policies', token, { product_id: product.id, name }, 'body.name')
    await expectRefused(h.call, 'PATCH', `/v1/policies/${policy.id}`, token, { name }, 'body.name')
  }
  for (const name of GOOD) {
    const res = await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { name } })
    expect(res.status).toBe(200)
    expect(res.body.name).toBe(name)
  }
})

test('API-key names: the account\'s own route and the operator\'s recovery route refuse control characters', async () => {
  const { id, token } = await h.account()
  for (const name of BAD) {
    await expectRefused(h.call, 'POST', '/v1/api-keys', token, { name, scope: 'validate' }, 'body.name')
    await expectRefused(h.call, 'POST', `/admin/accounts/${id}/api-keys`, ADMIN_TOKEN, { name, scope: 'validate' }, 'body.name')
  }
  for (const name of GOOD) {
    const res = await h.call('POST', '/v1/api-keys', { token, body: { name, scope: 'validate' } })
    expect(res.status).toBe(201)
    expect(res.body.name).toBe(name)
  }
})

test('validate\'s app_version refuses control characters on both doors and stores nothing', async () => {
  const { token } = await h.account()
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id)
  const fp = 'd'.repeat(64)
  for (const call of [h.call, appClient(h.node)]) {
    for (const app_version of BAD) {
      await expectRefused(call, 'POST', '/v1/validate', token, { key: key.key_value, device_fingerprint: fp, app_version }, 'body.app_version')
    }
    for (const app_version of ['2.4.1', '2.4.1-beta+5', '', 'ノート 1.0']) {
      const res = await call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fp, app_version } })
      expect(res.status).toBe(200)
      expect(res.body.valid).toBe(true)
    }
  }
  await h.node.deps.validation.flush()
  const rows = await h.node.deps.sql<{ app_version: string | null }[]>`select app_version from activations where key_id = ${key.id}`
  expect([...rows]).toEqual([{ app_version: 'ノート 1.0' }])
})

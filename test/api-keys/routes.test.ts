// The API-key routes (/v1/ping, /v1/api-keys) over the app, checked field by field against the contract.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { useHarness } from '../support/harness'
import { ISO_MS, newApiKeyShape } from '../support/helpers'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

describe('API keys', () => {
  test('GET /v1/ping answers for any scope', async () => {
    const { id, token } = await h.account()
    const res = await h.call('GET', '/v1/ping', { token })
    expect(res.status).toBe(200)
    // The account's name too: the console's top bar shows it instead of the id.
    expect(res.body).toEqual({ status: 'ok', accountId: id, accountName: 'Test growth' })
  })

  test('POST /v1/api-keys → 201 with token, token_prefix and last_used_at null; GET lists them without tokens', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'CI', scope: 'keys:read' } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual(newApiKeyShape('CI', 'keys:read', created.body.token))
    const list = await h.call('GET', '/v1/api-keys', { token })
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(2)
    for (const k of list.body.data) {
      expect(k.token).toBeUndefined()
      expect(Object.keys(k).sort()).toEqual(['created_at', 'id', 'last_used_at', 'name', 'scope', 'token_prefix'])
    }
    const { token: _omit, ...withoutToken } = created.body
    expect(list.body.data[1]).toEqual(withoutToken)
  })

  test('last_used_at is recorded (batched) after the key is used', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'used', scope: 'products:read' } })
    await h.call('GET', '/v1/products', { token: created.body.token })
    await h.node.deps.principals.flush()
    const list = await h.call('GET', '/v1/api-keys', { token })
    const used = list.body.data.find((k: { id: string }) => k.id === created.body.id)
    expect(used.last_used_at).toMatch(ISO_MS)
  })

  test('POST /v1/api-keys/:id/rotate: a new token at once; the old one is refused at once', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'rot', scope: 'products:read' } })
    const old = created.body.token
    expect((await h.call('GET', '/v1/products', { token: old })).status).toBe(200)
    const rotated = await h.call('POST', `/v1/api-keys/${created.body.id}/rotate`, { token })
    expect(rotated.status).toBe(200)
    expect(rotated.body).toMatchObject({ id: created.body.id, name: 'rot', scope: 'products:read' })
    expect(rotated.body.token).toMatch(/^kw_[A-Za-z0-9]{32}$/)
    expect(rotated.body.token).not.toBe(old)
    expect(rotated.body.token_prefix).toBe(rotated.body.token.slice(0, 7))
    expect((await h.call('GET', '/v1/products', { token: old })).status).toBe(401)
    expect((await h.call('GET', '/v1/products', { token: rotated.body.token })).status).toBe(200)
  })

  test('DELETE /v1/api-keys/:id → 204, then its token is 401 and it is gone from the list', async () => {
    const { token } = await h.account()
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'gone', scope: 'validate' } })
    expect((await h.call('GET', '/v1/ping', { token: created.body.token })).status).toBe(200)
    const del = await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })
    expect(del.status).toBe(204)
    expect(del.body).toBeNull()
    expect((await h.call('GET', '/v1/ping', { token: created.body.token })).status).toBe(401)
    const list = await h.call('GET', '/v1/api-keys', { token })
    expect(list.body.data.map((k: { id: string }) => k.id)).not.toContain(created.body.id)
    expect((await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })).status).toBe(404)
  })
})

// The hot state: changes reach validate before the call that made them returns (over HTTP), and the
// cache's own rules (bounded, negative entries, collapsed loads, TTLs, outage answers) in isolation.
import { describe, expect, spyOn, test } from 'bun:test'
import { LocalBus, type BusState } from '../../src/infra/bus'
import * as crypto from '../../src/infra/crypto'
import { deviceCount, HotState, hotKeyOf, type KeyState } from '../../src/modules/validation/hot/hot-state'
import { newKey, useHarness } from '../support/harness'
import { fingerprint, keyRow, setup, validate } from './support'

describe('over HTTP', () => {
  const h = useHarness()

  test('revoke, then validate at once: revoked (the cached valid answer is gone)', async () => {
    const { token, key } = await setup(h)
    const fp = fingerprint()
    for (let i = 0; i < 3; i++) expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
    expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'refund' } })).status).toBe(200)
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body).toEqual({ valid: false, reason: 'revoked' })
  })

  test('extend an expired key, then validate at once: valid', async () => {
    const { token, key } = await setup(h, { expires_at: new Date(Date.now() + 86_400_000).toISOString() })
    const fp = fingerprint()
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
    // The term runs out (moved into the past in Postgres, and the node reads the key again), instead of
    // waiting for a near expiry that a loaded machine could pass before the first validate.
    await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 second' where id = ${key.id}`
    h.node.deps.validation.hot.invalidate(crypto.hashKeyValue(crypto.normalizeKeyValue(key.key_value)!, 'base64'))
    expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).body.reason).toBe('expired')
    const until = new Date(Date.now() + 86_400_000).toISOString()
    expect((await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: until } })).status).toBe(200)
    const res = await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })
    expect(res.body).toEqual({
      valid: true, plan: null, expires_at: until, activations_used: 1, activation_limit: 3, policy_id: null, entitlements: {}, expired: false, grace_until: null, credits_remaining: null,
    })
  })

  test('a key created after a cached not_found validates at once', async () => {
    const { token, product } = await setup(h)
    const value = crypto.newKeyValue()
    const fp = fingerprint()
    const hotKey = crypto.hashKeyValue(crypto.normalizeKeyValue(value)!, 'base64')
    for (let i = 0; i < 2; i++) expect((await validate(h.call, token, { key: value, device_fingerprint: fp })).body.reason).toBe('not_found')
    // the negative answer is cached: the hot state holds the hash without a key
    expect(h.node.deps.validation.hot.get(hotKey)).toBeNull()
    // POST /v1/keys mints exactly this value
    const mint = spyOn(crypto, 'newKeyValue').mockReturnValueOnce(value)
    try {
      const created = await newKey(h.call, token, product.id)
      expect(created.key_value).toBe(value)
    } finally {
      mint.mockRestore()
    }
    expect((await validate(h.call, token, { key: value, device_fingerprint: fp })).body.valid).toBe(true)
  })

  test('API-key deletion: the token is refused by validate at once', async () => {
    const { token, key } = await setup(h)
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'app', scope: 'validate' } })
    const body = { key: key.key_value, device_fingerprint: fingerprint() }
    expect((await validate(h.call, created.body.token, body)).body.valid).toBe(true)
    expect((await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })).status).toBe(204)
    expect((await validate(h.call, created.body.token, body)).status).toBe(401)
  })
})

describe('HotState rules', () => {
  const row = keyRow
  const connectionError = () => Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' })
  const opts = { ttlMs: 60_000, degradedTtlMs: 2_000, maxKeys: 1000 }

  test('loads of one key collapse into one query; unknown keys are remembered (negative entries)', async () => {
    let calls = 0
    const hot = new HotState(async (hash) => {
      calls++
      await Bun.sleep(10)
      return hash === 'known' ? row() : null
    }, opts)
    const answers = await Promise.all(Array.from({ length: 20 }, () => hot.get('known')))
    expect(calls).toBe(1)
    expect(answers.every((a) => a !== null && a === answers[0])).toBe(true)
    expect(await hot.get('unknown')).toBeNull()
    expect(hot.get('unknown')).toBeNull() // synchronous: from memory
    expect(hot.get('known')).toBe(answers[0]!)
    expect(calls).toBe(2)
  })

  test('an invalidation overtaking a load keeps that load out of the cache', async () => {
    let version = 0
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const hot = new HotState(async () => {
      const v = ++version
      if (v === 1) await gate
      return row({ status: v === 1 ? 'active' : 'revoked' })
    }, opts)
    const first = hot.get('k') as Promise<unknown>
    hot.invalidate('k') // e.g. a revoke committed while the read was in flight
    release()
    expect(((await first) as KeyState).status).toBe('active')
    expect(((await hot.get('k')) as KeyState).status).toBe('revoked')
  })

  test('bounded: the least recently used entry is evicted first', async () => {
    const hot = new HotState(async (hash) => row({ productId: hash }), { ...opts, maxKeys: 3 })
    for (const k of ['a', 'b', 'c']) await hot.get(k)
    hot.get('a') // a hit: a gets a second chance
    await hot.get('d')
    expect(hot.size).toBe(3)
    expect(hot.get('a')).not.toBeInstanceOf(Promise)
    expect(hot.get('b')).toBeInstanceOf(Promise) // b was evicted
  })

  test('past the TTL an entry is re-read; while the bus is down, past the degraded TTL', async () => {
    let calls = 0
    let busState: BusState = 'ok'
    const hot = new HotState(async () => (calls++, row()), { ttlMs: 200, degradedTtlMs: 20, maxKeys: 10, trusted: () => busState !== 'down' })
    await hot.get('k')
    await Bun.sleep(40)
    expect(hot.get('k')).not.toBeInstanceOf(Promise)
    busState = 'down'
    await hot.get('k')
    expect(calls).toBe(2)
    busState = 'ok'
    await Bun.sleep(220)
    await hot.get('k')
    expect(calls).toBe(3)
  })

  test('Postgres unreachable: the last known state answers; nothing known is an error', async () => {
    let down = false
    const hot = new HotState(async (hash) => {
      if (down) throw connectionError()
      return hash === 'gone' ? null : row({ devices: ['d1'] })
    }, { ...opts, ttlMs: 10 })
    await hot.get('k')
    await hot.get('gone')
    down = true
    await Bun.sleep(20)
    expect(((await hot.get('k')) as KeyState).devices).toBe('d1')
    expect(await hot.get('gone')).toBeNull()
    await expect(hot.get('never-seen') as Promise<unknown>).rejects.toMatchObject({ code: 'ECONNREFUSED' })
  })

  test('bus messages: device adds, key drops, resync clears', async () => {
    const bus = new LocalBus()
    let calls = 0
    const hot = new HotState(async () => (calls++, row({ devices: ['d1'] })), opts, bus)
    // the bus speaks key_hash (hex); the hot state keys by the same digest in base64
    const keyHash = 'ab'.repeat(32)
    const k = hotKeyOf(keyHash)
    await hot.get(k)
    expect((hot.get(k) as KeyState).devices).toBe('d1')
    await bus.publish({ kind: 'device', accountId: 'acct_1', keyHash, fingerprint: 'd2', activationId: 'act_x' })
    await bus.publish({ kind: 'device', accountId: 'acct_1', keyHash, fingerprint: 'd2', activationId: 'act_x' })
    expect((hot.get(k) as KeyState).devices).toEqual(['d1', 'd2'])
    expect(deviceCount(hot.get(k) as KeyState)).toBe(2)
    await bus.publish({ kind: 'key', accountId: 'acct_1', keyHash })
    expect(hot.get(k)).toBeInstanceOf(Promise)
    await bus.publish({ kind: 'resync' })
    expect(hot.size).toBe(0)
    expect(calls).toBe(2)
    hot.close()
  })
})

// A flood of unknown keys (anyone holding a validate token can send one) must not push known keys out
// of the hot state: negative entries live in their own bounded space. Counted in Postgres loads and
// in the node's own cache-lookup metric, never in time.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import * as crypto from '../../src/infra/crypto'
import { HotState } from '../../src/modules/validation/hot/hot-state'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { fingerprint, keyRow as row, validate } from './support'


describe('HotState under a flood of unknown keys', () => {
  test('known keys stay in memory: no reload of any known key, every later lookup synchronous', async () => {
    const known = Array.from({ length: 50 }, (_, i) => `known-${i}`)
    const loads = new Map<string, number>()
    const hot = new HotState(
      async (k) => {
        loads.set(k, (loads.get(k) ?? 0) + 1)
        return k.startsWith('known-') ? row({ productId: k }) : null
      },
      { ttlMs: 60_000, degradedTtlMs: 2_000, maxKeys: known.length, maxUnknownKeys: 256 },
    )
    for (const k of known) await hot.get(k)
    for (let i = 0; i < 5_000; i++) {
      expect(await hot.get(`unknown-${i}`)).toBeNull()
      if (i % 100 === 0) for (const k of known) hot.get(k) // known keys keep being used during the flood
    }
    for (const k of known) {
      const state = hot.get(k)
      expect(state).not.toBeInstanceOf(Promise)
      expect(state).toMatchObject({ productId: k })
    }
    for (const k of known) expect(loads.get(k)).toBe(1)
    expect(hot.size).toBe(known.length)
  })

  test('the negative space is bounded and still answers repeated unknown keys from memory', async () => {
    let loads = 0
    const hot = new HotState(
      async () => (loads++, null),
      { ttlMs: 60_000, degradedTtlMs: 2_000, maxKeys: 10, maxUnknownKeys: 64 },
    )
    for (let i = 0; i < 1_000; i++) await hot.get(`unknown-${i}`)
    expect(hot.unknownSize).toBeLessThanOrEqual(64)
    await hot.get('repeated')
    const before = loads
    for (let i = 0; i < 10; i++) expect(hot.get('repeated')).toBeNull() // synchronous, no query
    expect(loads).toBe(before)
  })
})

describe('over HTTP: validate of known keys during a flood', () => {
  const KNOWN = 12
  let h: Harness
  beforeAll(async () => {
    h = await startHarness({ CACHE_MAX_KEYS: String(KNOWN) })
  }, 60_000)
  afterAll(() => h?.close())

  async function lookups(): Promise<Record<string, number>> {
    const text = await (await fetch(`${h.node.url}/metrics`)).text()
    const out: Record<string, number> = {}
    for (const m of text.matchAll(/^keyward_hot_cache_lookups_total\{result="(\w+)"\} (\d+)/gm)) out[m[1]] = Number(m[2])
    return out
  }

  test('unknown keys do not evict known ones: no cache miss for a known key after the flood', async () => {
    const { token } = await h.account('growth')
    const product = await newProduct(h.call, token)
    const keys = []
    for (let i = 0; i < KNOWN; i++) keys.push({ value: (await newKey(h.call, token, product.id)).key_value as string, fp: fingerprint() })
    for (const k of keys) expect((await validate(h.call, token, { key: k.value, device_fingerprint: k.fp })).body.valid).toBe(true)
    for (const k of keys) expect((await validate(h.call, token, { key: k.value, device_fingerprint: k.fp })).body.valid).toBe(true)

    const fp = fingerprint()
    for (let i = 0; i < 200; i++) {
      const res = await validate(h.call, token, { key: crypto.newKeyValue(), device_fingerprint: fp })
      expect(res.body).toEqual({ valid: false, reason: 'not_found' })
    }

    const before = await lookups()
    for (const k of keys) expect((await validate(h.call, token, { key: k.value, device_fingerprint: k.fp })).body.valid).toBe(true)
    const after = await lookups()
    expect((after.miss ?? 0) - (before.miss ?? 0)).toBe(0)
    expect((after.stale ?? 0) - (before.stale ?? 0)).toBe(0)
    expect((after.hit ?? 0) - (before.hit ?? 0)).toBe(KNOWN)
  }, 120_000)
})

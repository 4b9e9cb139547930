// The shared read-through rules (infra/read-through-cache.ts) on a minimal storage, and the fixed-size
// table of negative entries (modules/validation/hot/absent-keys.ts). Counted in reads, never timed.
import { describe, expect, test } from 'bun:test'
import { AbsentKeys } from '../../src/modules/validation/hot/absent-keys'
import { ReadThroughCache, type CacheRules } from '../../src/infra/read-through-cache'
import type { BusState } from '../../src/infra/bus'

type Value = { v: string; loadedAt: number }

/** A plain Map as storage; `source` plays Postgres. */
class MapCache extends ReadThroughCache<Value> {
  reads = 0
  held = new Map<string, Value>()
  absent = new Map<string, number>()
  constructor(
    private source: (key: string) => Promise<string | null>,
    rules: Partial<CacheRules> = {},
  ) {
    super({ ttlMs: 60_000, degradedTtlMs: 2_000, ...rules })
  }
  protected async read(key: string, loadedAt: number) {
    this.reads++
    const v = await this.source(key)
    return v === null ? null : { v, loadedAt }
  }
  protected lookup(key: string) {
    return this.held.get(key)
  }
  protected absentSince(key: string) {
    return this.absent.get(key)
  }
  protected keep(key: string, value: Value | null, loadedAt: number) {
    if (value) this.held.set(key, value)
    else this.absent.set(key, loadedAt)
  }
  protected drop(key: string) {
    this.held.delete(key)
    this.absent.delete(key)
  }
  protected dropAll() {
    this.held.clear()
    this.absent.clear()
  }
  /** Wholesale cancellation without dropping entries (as an account-wide change does). */
  cancel() {
    this.cancelReads()
  }
}

const connectionError = () => Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' })

describe('read-through rules', () => {
  test('while memory is not trusted, entries answer only for the degraded TTL (one input decides)', async () => {
    let state: BusState = 'ok'
    const cache = new MapCache(async () => 'x', { ttlMs: 60_000, degradedTtlMs: 10, trusted: () => state !== 'down' })
    await cache.get('k')
    await Bun.sleep(20)
    expect(cache.get('k')).not.toBeInstanceOf(Promise) // trusted: the 60 s TTL applies
    state = 'down'
    expect(cache.get('k')).toBeInstanceOf(Promise) // not trusted: past the degraded TTL, re-read
    expect(cache.reads).toBe(2)
  })

  test('a wholesale drop overtaking a read keeps that read out; later callers read again', async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let n = 0
    const cache = new MapCache(async () => {
      const mine = ++n
      if (mine === 1) await gate
      return `v${mine}`
    })
    const first = cache.get('k') as Promise<Value | null>
    cache.cancel() // e.g. the account's plan changed while the read was in flight
    const second = cache.get('k') as Promise<Value | null>
    release()
    expect((await first)!.v).toBe('v1') // its caller still gets an answer
    expect((await second)!.v).toBe('v2') // did not join the cancelled read
    expect((cache.get('k') as Value).v).toBe('v2') // and only the new read was kept
    cache.clear()
    expect(cache.held.size).toBe(0)
  })

  test('Postgres unreachable: held values and negative entries answer, and no retry for a moment', async () => {
    let down = false
    const cache = new MapCache(async (k) => {
      if (down) throw connectionError()
      return k === 'gone' ? null : 'x'
    }, { ttlMs: 10, degradedTtlMs: 10 })
    await cache.get('k')
    await cache.get('gone')
    down = true
    await Bun.sleep(20)
    expect(((await cache.get('k')) as Value).v).toBe('x')
    const reads = cache.reads
    expect(cache.get('k')).toMatchObject({ v: 'x' }) // synchronous: within the retry back-off
    expect(cache.get('gone')).toBeNull()
    expect(cache.reads).toBe(reads)
    await expect(cache.get('never-seen') as Promise<unknown>).rejects.toMatchObject({ code: 'ECONNREFUSED' })
  })

  test('a re-read that hangs answers the held value and goes on in the background', async () => {
    let hang = false
    let release!: () => void
    const cache = new MapCache(async () => {
      if (hang) await new Promise<void>((r) => (release = r))
      return hang ? 'new' : 'old'
    }, { ttlMs: 10, degradedTtlMs: 10 })
    await cache.get('k')
    await Bun.sleep(20)
    hang = true
    expect(((await cache.get('k')) as Value).v).toBe('old')
    release()
    await Bun.sleep(0)
    expect(cache.held.get('k')!.v).toBe('new')
  })
})

describe('AbsentKeys', () => {
  test('bounded: a flood never grows it past its capacity', () => {
    const t = new AbsentKeys(128)
    for (let i = 0; i < 10_000; i++) t.set(`guess-${i}`, i)
    expect(t.size).toBeLessThanOrEqual(128)
    expect(t.size).toBeGreaterThan(64)
  })

  test('a key answered from the table outlives a flood of one-off guesses', () => {
    const t = new AbsentKeys(256)
    t.set('repeated', 0)
    for (let i = 1; i <= 20_000; i++) {
      t.set(`guess-${i}`, i)
      if (i % 10 === 0) expect(t.since('repeated')).toBe(0)
    }
  })

  test('two keys in use share a pair: a newcomer is refused once, then takes the place of one not used again', () => {
    const t = new AbsentKeys(2) // one pair: every key lands in it
    t.set('a', 1)
    t.set('b', 2)
    t.since('a')
    t.since('b')
    t.set('c', 3)
    expect(t.since('c')).toBeUndefined()
    expect(t.since('a')).toBe(1) // a used again: b is the one to go
    t.set('d', 4)
    expect(t.since('a')).toBe(1)
    expect(t.since('b')).toBeUndefined()
    expect(t.since('d')).toBe(4)
  })

  test('exact keys, delete and clear; capacity 0 keeps nothing', () => {
    const t = new AbsentKeys(8)
    t.set('a', 1)
    expect(t.since('a')).toBe(1)
    expect(t.since('b')).toBeUndefined()
    t.set('a', 2)
    expect(t.since('a')).toBe(2)
    expect(t.size).toBe(1)
    t.delete('a')
    expect(t.since('a')).toBeUndefined()
    t.set('c', 3)
    t.clear()
    expect(t.size).toBe(0)
    expect(t.since('c')).toBeUndefined()
    const none = new AbsentKeys(0)
    none.set('a', 1)
    expect(none.since('a')).toBeUndefined()
  })
})

// The policy cache on its own (src/modules/validation/policy-cache.ts): what it reads, when it answers
// from memory, what a bus message drops, and what it answers while Postgres is away. Its Postgres is a
// stand-in for the one query it makes (loadPolicySettings), so each read is seen and can be held open.
import { expect, test } from 'bun:test'
import { LocalBus } from '../../src/infra/bus'
import type { Sql } from '../../src/infra/db'
import type { PolicySettings } from '../../src/modules/policies/repo'
import { PolicyCache, type PolicyTerms } from '../../src/modules/validation/policy-cache'

const TTL = 10_000
const DEGRADED = 1_000

const settings = (over: Partial<PolicySettings> = {}): PolicySettings => ({
  plan: 'pro',
  activation_limit: 5,
  duration: null,
  expiry_basis: 'creation',
  one_key_per_device: false,
  grace_seconds: 60,
  after_expiry: 'refuse',
  release_after_seconds: null,
  deactivations_allowed: null,
  entitlements: { seats: 5 },
  component_match: 'off',
  ...over,
})

/**
 * A Postgres that answers `select … from policies where id = $1` from `rows`, counting reads per id.
 * `hold()` keeps the next reads open until `release()`; `fail` makes them fail with `fail`.
 */
function fakePostgres(rows: Map<string, PolicySettings>) {
  const reads: string[] = []
  let held: (() => void)[] | null = null
  const state = { fail: null as unknown }
  const sql = ((first: TemplateStringsArray | string, ...values: unknown[]) => {
    // the pieces the query is built from (an identifier, the settings' column list) are not reads
    if (typeof first === 'string' || !first.join('').includes('from policies')) return { fragment: first }
    const id = values.at(-1) as string
    reads.push(id)
    const answer = async () => {
      if (held) await new Promise<void>((r) => held!.push(r))
      if (state.fail) throw state.fail
      const row = rows.get(id)
      return row ? [structuredClone(row)] : []
    }
    return answer()
  }) as unknown as Sql
  return {
    sql,
    reads,
    state,
    hold: () => void (held = []),
    release: () => {
      const waiting = held ?? []
      held = null
      for (const r of waiting) r()
    },
  }
}

function setUp(opts: { trusted?: (now: number) => boolean } = {}) {
  const rows = new Map([['pol_a', settings()], ['pol_b', settings({ plan: 'basic', activation_limit: 1 })]])
  const pg = fakePostgres(rows)
  const bus = new LocalBus()
  const cache = new PolicyCache(pg.sql, { ttlMs: TTL, degradedTtlMs: DEGRADED, trusted: opts.trusted }, bus)
  return { rows, pg, bus, cache }
}

const connectionRefused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })

test('a miss reads the policy once and turns its row into terms; the next lookup answers from memory, synchronously', async () => {
  const { pg, cache } = setUp()
  const before = Date.now()
  const first = cache.get('pol_a')
  expect(first).toBeInstanceOf(Promise)
  const terms = (await first) as PolicyTerms
  expect(terms).toMatchObject({ plan: 'pro', limit: 5, entitlements: { seats: 5 }, graceMs: 60_000, keep: false, oneKeyPerDevice: false })
  expect(terms.loadedAt).toBeGreaterThanOrEqual(before)
  expect(Object.isFrozen(terms.entitlements)).toBe(true)
  const again = cache.get('pol_a')
  expect(again).toBe(terms)
  expect(pg.reads).toEqual(['pol_a'])
})

test('after_expiry keep and one key per device carry over', async () => {
  const { rows, cache } = setUp()
  rows.set('pol_c', settings({ after_expiry: 'keep', one_key_per_device: true, grace_seconds: 0 }))
  expect(await cache.get('pol_c')).toMatchObject({ keep: true, oneKeyPerDevice: true, graceMs: 0 })
})

test('a policy that does not exist is held as absent: null again without a read', async () => {
  const { pg, cache } = setUp()
  expect(await cache.get('pol_gone')).toBeNull()
  expect(cache.get('pol_gone')).toBeNull()
  expect(pg.reads).toEqual(['pol_gone'])
})

test('concurrent lookups of one policy share one read', async () => {
  const { pg, cache } = setUp()
  pg.hold()
  const all = Promise.all([cache.get('pol_a'), cache.get('pol_a'), cache.get('pol_a')])
  pg.release()
  const [a, b, c] = await all
  expect(a).toBe(b)
  expect(b).toBe(c)
  expect(pg.reads).toEqual(['pol_a'])
})

test("a policy message drops that policy only: its next lookup reads the new terms, another policy's stays", async () => {
  const { rows, pg, bus, cache } = setUp()
  await cache.get('pol_a')
  await cache.get('pol_b')
  rows.set('pol_a', settings({ activation_limit: 9 }))
  await bus.publish({ kind: 'policy', policyId: 'pol_a' })
  expect(await cache.get('pol_a')).toMatchObject({ limit: 9 })
  expect(cache.get('pol_b')).toMatchObject({ plan: 'basic', limit: 1 })
  expect(pg.reads).toEqual(['pol_a', 'pol_b', 'pol_a'])
})

test('a read overtaken by a policy message answers its caller but is not kept (it may predate the change)', async () => {
  const { rows, pg, bus, cache } = setUp()
  pg.hold()
  const inFlight = cache.get('pol_a')
  await bus.publish({ kind: 'policy', policyId: 'pol_a' })
  rows.set('pol_a', settings({ activation_limit: 2 }))
  pg.release()
  expect(await inFlight).toMatchObject({ limit: 2 }) // its caller gets what it read
  rows.set('pol_a', settings({ activation_limit: 3 }))
  expect(await cache.get('pol_a')).toMatchObject({ limit: 3 })
  expect(pg.reads).toEqual(['pol_a', 'pol_a'])
})

test('a resync drops every policy (messages may have been missed)', async () => {
  const { pg, bus, cache } = setUp()
  await cache.get('pol_a')
  await cache.get('pol_gone')
  await bus.publish({ kind: 'resync' })
  expect(cache.get('pol_a')).toBeInstanceOf(Promise)
  expect(cache.get('pol_gone')).toBeInstanceOf(Promise)
  expect(pg.reads).toEqual(['pol_a', 'pol_gone', 'pol_a', 'pol_gone'])
})

test('fresh until the TTL; past 75% of it a lookup still answers from memory and re-reads in the background; past it, a read', async () => {
  const { rows, pg, cache } = setUp()
  const terms = (await cache.get('pol_a')) as PolicyTerms
  const t0 = terms.loadedAt
  expect(cache.get('pol_a', t0 + TTL * 0.5)).toBe(terms)
  expect(pg.reads).toHaveLength(1)
  rows.set('pol_a', settings({ activation_limit: 7 }))
  expect(cache.get('pol_a', t0 + TTL * 0.8)).toBe(terms) // answered from memory...
  expect(pg.reads).toHaveLength(2) // ...while a background read starts
  await Bun.sleep(0)
  const refreshed = cache.get('pol_a') as PolicyTerms
  expect(refreshed.limit).toBe(7)
  const expired = cache.get('pol_a', refreshed.loadedAt + TTL + 1)
  expect(expired).toBeInstanceOf(Promise)
  await expired
  expect(pg.reads).toHaveLength(3)
})

test('while the bus says memory cannot be trusted, an entry answers only for the degraded TTL', async () => {
  let trusted = true
  const { pg, cache } = setUp({ trusted: () => trusted })
  const terms = (await cache.get('pol_a')) as PolicyTerms
  const at = terms.loadedAt + DEGRADED + 1
  expect(cache.get('pol_a', at)).toBe(terms)
  trusted = false
  expect(cache.get('pol_a', at)).toBeInstanceOf(Promise)
  expect(pg.reads).toHaveLength(2)
})

test('Postgres unreachable: a held policy answers with what was known, a policy never read propagates the error', async () => {
  const { pg, cache } = setUp()
  const terms = (await cache.get('pol_a')) as PolicyTerms
  pg.state.fail = connectionRefused
  expect(await cache.get('pol_a', terms.loadedAt + TTL + 1)).toBe(terms)
  await expect(Promise.resolve(cache.get('pol_b'))).rejects.toBe(connectionRefused)
})

test('another failure than a lost connection propagates even with the policy held', async () => {
  const { pg, cache } = setUp()
  const terms = (await cache.get('pol_a')) as PolicyTerms
  const bug = new Error('column "grace_seconds" does not exist')
  pg.state.fail = bug
  await expect(Promise.resolve(cache.get('pol_a', terms.loadedAt + TTL + 1))).rejects.toBe(bug)
})

test('close stops listening to the bus and forgets what it held', async () => {
  const { pg, bus, cache } = setUp()
  await cache.get('pol_a')
  cache.close()
  expect(cache.get('pol_a')).toBeInstanceOf(Promise)
  await cache.get('pol_a')
  await bus.publish({ kind: 'policy', policyId: 'pol_a' }) // no longer heard: the entry stays
  expect(cache.get('pol_a')).not.toBeInstanceOf(Promise)
  expect(pg.reads).toEqual(['pol_a', 'pol_a'])
})

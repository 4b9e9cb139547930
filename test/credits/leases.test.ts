// The credit-lease state machine (src/modules/credits/leases.ts) and the record's take beneath it
// (credits/repo.ts), driven directly on a real database rather than through HTTP: take, spend from
// memory, give back when idle, on a bus message and at shutdown, a `set`'s epoch that voids what a
// lease gives back, the untrusted-bus mode (each call takes exactly its cost), and the exhaustion
// remembered for 1 s. The rules are docs/architecture.md, "Metered keys: credit leases". Each lease
// here is this test's own (its own bus and node id), beside the harness node's, which never holds
// these keys. Costs and balances are exact; no assertion depends on how fast the machine is.
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { LocalBus } from '../../src/infra/bus'
import { CreditLeases } from '../../src/modules/credits/leases'
import type { Spent } from '../../src/modules/credits/model'
import { takeCredits } from '../../src/modules/credits/service'
import { findKey } from '../../src/modules/keys/repo'
import { newKey, newProduct, useHarness } from '../support/harness'
import { eventsOf } from '../support/helpers'
import { waitUntil } from '../support/wait'

setDefaultTimeout(30_000)

const h = useHarness({ socket: false })

/** A bus whose trust the test sets (LocalBus always trusts: one process). */
class TestBus extends LocalBus {
  trust = true
  override trusted(_now: number): boolean {
    return this.trust
  }
}

/** The key's hash is its reference here (the engine uses its hot-state key; credits only convert). */
const SAME = { refOf: (keyHash: string) => keyHash, hashOf: (keyRef: string) => keyRef }

const opened: CreditLeases[] = []
afterEach(async () => {
  for (const l of opened.splice(0)) await l.close()
})

function newLeases(bus = new TestBus()) {
  const leases = new CreditLeases(h.node.deps.sql, bus, SAME, findKey)
  opened.push(leases)
  return { leases, bus }
}

/** A metered key of a new account with `remaining` credits: its id, hash (the lease's key ref) and owner. */
async function metered(remaining: number) {
  const { id: accountId, token } = await h.account()
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { credits: { remaining } })
  const [{ key_hash: keyHash }] = await h.node.deps.sql<{ key_hash: string }[]>`select key_hash from license_keys where id = ${key.id}`
  return { id: key.id as string, keyHash, accountId, productId: product.id as string, token }
}

/** The key's record and the lease rows out. */
async function stored(id: string) {
  const sql = h.node.deps.sql
  const [k] = await sql<{ remaining: string; debt: string; epoch: number; exhausted: boolean }[]>`
    select credits_remaining as remaining, credits_debt as debt, credits_epoch as epoch, credits_exhausted as exhausted from license_keys where id = ${id}`
  const rows = await sql<{ held: string; epoch: number }[]>`select held, epoch from credit_leases where key_id = ${id}`
  return {
    record: Number(k!.remaining),
    debt: Number(k!.debt),
    epoch: k!.epoch,
    exhausted: k!.exhausted,
    leases: rows.map((r) => ({ held: Number(r.held), epoch: r.epoch })),
  }
}

const heldIn = (s: { leases: { held: number }[] }) => s.leases.reduce((n, l) => n + l.held, 0)

type Key = Awaited<ReturnType<typeof metered>>
const spend = (leases: CreditLeases, k: Key, cost: number, now = Date.now()) => leases.spend(k.keyHash, k.accountId, k.productId, cost, now)

describe('the record: a take', () => {
  const take = (k: Key, p: { leaseId?: string; held?: number; need: number; want: number }) =>
    takeCredits(h.node.deps.sql, { keyHash: k.keyHash, nodeId: 'test-node', leaseId: p.leaseId ?? randomUUID(), held: p.held ?? 0, need: p.need, want: p.want, now: Date.now() }, findKey)

  test('moves at most a quarter of the record past the need into the lease row, the need itself near zero, nothing below it', async () => {
    const k = await metered(100)
    // want far above: a quarter of 100
    expect(await take(k, { need: 1, want: 100_000 })).toMatchObject({ kind: 'taken', keyId: k.id, taken: 25, record: 75, refillsAt: null })
    // want below the quarter: what is wanted
    expect(await take(k, { need: 1, want: 5 })).toMatchObject({ taken: 5, record: 70 })
    // the need above the quarter: the need
    expect(await take(k, { need: 40, want: 40 })).toMatchObject({ taken: 40, record: 30 })
    let s = await stored(k.id)
    expect(s.record).toBe(30)
    // each lease row holds what it took less the need its call spent
    expect(s.leases.map((l) => l.held).sort((a, b) => a - b)).toEqual([0, 4, 24])
    expect(s.record + heldIn(s) + 1 + 1 + 40).toBe(100)
    // near zero the last credits go one call at a time: floor(3 / 4) = 0, so exactly the need
    const near = await metered(3)
    expect(await take(near, { need: 1, want: 100_000 })).toMatchObject({ taken: 1, record: 2 })
    // a record below the need gives nothing and keeps what it has
    expect(await take(near, { need: 5, want: 5 })).toMatchObject({ taken: 0, record: 2 })
    s = await stored(near.id)
    expect(s.record).toBe(2)
    expect(s.exhausted).toBe(false)
  })

  test('an unmetered key takes nothing; the take that leaves nothing anywhere announces key.credits_exhausted once', async () => {
    const { token } = await h.account()
    const product = await newProduct(h.call, token)
    const plain = await newKey(h.call, token, product.id)
    const [{ key_hash }] = await h.node.deps.sql<{ key_hash: string }[]>`select key_hash from license_keys where id = ${plain.id}`
    expect(await takeCredits(h.node.deps.sql, { keyHash: key_hash, nodeId: 'n', leaseId: randomUUID(), held: 0, need: 1, want: 1, now: Date.now() }, findKey))
      .toEqual({ kind: 'unmetered' })

    const k = await metered(2)
    await take(k, { need: 1, want: 1 })
    expect(await eventsOf(h, k.accountId, 'key.credits_exhausted')).toEqual([])
    await take(k, { need: 1, want: 1 })
    expect((await stored(k.id)).exhausted).toBe(true)
    const events = await eventsOf(h, k.accountId, 'key.credits_exhausted')
    expect(events.length).toBe(1)
    // the payload is the key as the API shows it (read by the findKey passed in)
    expect(events[0]!.data).toMatchObject({ id: k.id, credits: { remaining: 0 } })
    // refused afterwards: not announced again
    expect(await take(k, { need: 1, want: 1 })).toMatchObject({ taken: 0, record: 0 })
    expect((await eventsOf(h, k.accountId, 'key.credits_exhausted')).length).toBe(1)
  })
})

describe("a node's leases", () => {
  test('the first spend takes from the record; later ones are answered from memory; the credits add up exactly', async () => {
    const k = await metered(1_000)
    const { leases } = newLeases()
    const first = spend(leases, k, 1)
    expect(first).toBeInstanceOf(Promise) // no lease yet: a take from the record
    expect(await first).toMatchObject({ ok: true })
    let spent = 1
    let fromMemory: Spent | null = null
    // the lease grows with the node's demand: within a few calls one is covered by it (no I/O)
    for (let i = 0; i < 20 && fromMemory === null; i++) {
      const s = spend(leases, k, 1)
      spent += 1
      if (s instanceof Promise) expect(await s).toMatchObject({ ok: true })
      else fromMemory = s
    }
    expect(fromMemory).toMatchObject({ ok: true })
    expect(leases.size).toBe(1)
    // the flush writes what the lease holds: the record plus it is what was granted less what was spent
    await leases.flush()
    const s = await stored(k.id)
    expect(s.leases.length).toBe(1)
    expect(s.record + heldIn(s)).toBe(1_000 - spent)
    // what an answer says is left: the lease and the record as of its last take
    expect((fromMemory as Spent & { ok: true }).remaining).toBe(1_000 - spent)
  })

  test('concurrent spends on one node wait for its one take in flight: one lease row, every cost spent once', async () => {
    const k = await metered(1_000)
    const { leases } = newLeases()
    const answers = await Promise.all([1, 2, 3, 1, 2].map((cost) => spend(leases, k, cost)))
    expect(answers.every((a) => a.ok)).toBe(true)
    await leases.flush()
    const s = await stored(k.id)
    expect(s.leases.length).toBe(1)
    expect(s.record + heldIn(s)).toBe(1_000 - 9)
  })

  test('a refund gives a refused call its cost back to its lease; cost 0 reads the balance and spends nothing', async () => {
    const k = await metered(50)
    const { leases } = newLeases()
    expect(await spend(leases, k, 0)).toEqual({ ok: true, remaining: 50 })
    const s = await spend(leases, k, 4)
    expect(s).toMatchObject({ ok: true, remaining: 46 })
    leases.refund((s as Spent & { ok: true }).from, 4)
    expect(await spend(leases, k, 0)).toEqual({ ok: true, remaining: 50 })
    await leases.close()
    expect(await stored(k.id)).toMatchObject({ record: 50, leases: [] })
  })

  test('a lease unused for 5 s is given back by the flush; a used one is kept and its holding written', async () => {
    const k = await metered(500)
    const { leases } = newLeases()
    for (const cost of [3, 3, 3]) expect(await spend(leases, k, cost)).toMatchObject({ ok: true })
    const now = Date.now()
    await leases.flush(now)
    expect(leases.size).toBe(1)
    let s = await stored(k.id)
    expect(s.leases.length).toBe(1)
    expect(s.record + heldIn(s)).toBe(491)
    // 5 s later by the flush's clock, without a spend: given back, the row gone, the record whole again
    await leases.flush(now + 5_001)
    expect(leases.size).toBe(0)
    await waitUntil(async () => (await stored(k.id)).leases.length === 0, 10_000, 'the idle lease to be given back')
    s = await stored(k.id)
    expect(s.record).toBe(491)
  })

  test('a bus message naming the key drops its lease at once (in the handler) and gives the rest back; so do keys and resync', async () => {
    const bus = new TestBus()
    const { leases } = newLeases(bus)
    for (const [kind, remaining] of [['key', 300], ['keys', 301], ['resync', 302]] as const) {
      const k = await metered(remaining)
      for (const cost of [2, 2, 2]) expect(await spend(leases, k, cost)).toMatchObject({ ok: true })
      expect(leases.size).toBe(1)
      const published = bus.publish(
        kind === 'key' ? { kind, accountId: k.accountId, keyHash: k.keyHash } : kind === 'keys' ? { kind, keyHashes: [k.keyHash] } : { kind },
      )
      expect(leases.size).toBe(0) // dropped before the publish (the node's acknowledgement) completes
      await published
      await waitUntil(async () => (await stored(k.id)).leases.length === 0, 10_000, `the lease to be given back on ${kind}`)
      expect((await stored(k.id)).record).toBe(remaining - 6)
    }
    // a message for another key leaves the lease alone
    const k = await metered(10)
    expect(await spend(leases, k, 1)).toMatchObject({ ok: true })
    await bus.publish({ kind: 'key', accountId: k.accountId, keyHash: '00'.repeat(32) })
    expect(leases.size).toBe(1)
  })

  test('after a `set` (a new epoch) a lease of the old epoch gives nothing back; the key is exactly the new balance', async () => {
    const bus = new TestBus()
    const { leases } = newLeases(bus)
    const k = await metered(1_000)
    for (let i = 0; i < 10; i++) expect(await spend(leases, k, 1)).toMatchObject({ ok: true })
    await leases.flush()
    const before = await stored(k.id)
    const set = await h.call('POST', `/v1/keys/${k.id}/credits`, { token: k.token, body: { operation: 'set', amount: 50 } })
    expect(set.status).toBe(200)
    expect(set.body.credits.remaining).toBe(50)
    const after = await stored(k.id)
    expect(after).toMatchObject({ record: 50, epoch: before.epoch + 1, leases: [] })
    // the message reaches this node: its lease of the old epoch goes back and adds nothing
    await bus.publish({ kind: 'key', accountId: k.accountId, keyHash: k.keyHash })
    await leases.close()
    expect(await stored(k.id)).toMatchObject({ record: 50, debt: 0, leases: [] })
  })

  test('a lease still held after a `set` is void too: its return adds nothing, and the next take is from the new balance', async () => {
    const { leases } = newLeases()
    const k = await metered(1_000)
    for (let i = 0; i < 10; i++) expect(await spend(leases, k, 1)).toMatchObject({ ok: true })
    expect((await h.call('POST', `/v1/keys/${k.id}/credits`, { token: k.token, body: { operation: 'set', amount: 7 } })).status).toBe(200)
    // this node missed the message: its lease is given back at shutdown, into an epoch that moved on
    await leases.close()
    expect(await stored(k.id)).toMatchObject({ record: 7, leases: [] })
    const { leases: fresh } = newLeases()
    expect(await spend(fresh, k, 2)).toMatchObject({ ok: true, remaining: 5 })
  })

  test('while the bus is not trusted, a lease is given back and each call takes exactly its cost from the record', async () => {
    const bus = new TestBus()
    const { leases } = newLeases(bus)
    const k = await metered(1_000)
    let spent = 0
    for (let i = 0; i < 10; i++) {
      expect(await spend(leases, k, 1)).toMatchObject({ ok: true })
      spent += 1
    }
    bus.trust = false
    for (const cost of [3, 1, 2]) {
      const s = spend(leases, k, cost)
      expect(s).toBeInstanceOf(Promise) // never from memory: a `set` might not reach this node
      expect(await s).toMatchObject({ ok: true })
      spent += cost
      await waitUntil(async () => (await stored(k.id)).leases.every((l) => l.held === 0), 10_000, 'the earlier lease to be given back')
      const s2 = await stored(k.id)
      // the lease row holds nothing: the record is exactly what was granted less what was spent
      expect(s2.record).toBe(1_000 - spent)
      expect(heldIn(s2)).toBe(0)
    }
    // trusted again: leases are taken and spent from memory once more
    bus.trust = true
    expect(await spend(leases, k, 1)).toMatchObject({ ok: true })
    spent += 1
    await leases.close()
    expect(await stored(k.id)).toMatchObject({ record: 1_000 - spent, leases: [] })
  })

  test('a call the record cannot cover is refused; for 1 s a call costing more than was left is refused from memory', async () => {
    const bus = new TestBus()
    const { leases } = newLeases(bus)
    const k = await metered(2)
    const t0 = Date.now()
    const refused = spend(leases, k, 3, t0)
    expect(refused).toBeInstanceOf(Promise)
    expect(await refused).toEqual({ ok: false, remaining: 2, refillsAt: null })
    const t1 = Date.now()
    // remembered: refused without a take (the exhaustion was recorded at or after t0)
    const remembered = spend(leases, k, 3, t0)
    expect(remembered).not.toBeInstanceOf(Promise)
    expect(remembered).toEqual({ ok: false, remaining: 2, refillsAt: null })
    // more than 1 s after it (by the caller's clock): asked of the record again, still refused
    const later = spend(leases, k, 3, t1 + 1_001)
    expect(later).toBeInstanceOf(Promise)
    expect(await later).toMatchObject({ ok: false, remaining: 2 })
    // a call within what is left is not refused from memory: it takes, and spends the last credits
    const within = spend(leases, k, 2, Date.now())
    expect(await within).toMatchObject({ ok: true, remaining: 0 })
    expect(await stored(k.id)).toMatchObject({ record: 0, exhausted: true })
    // a key change forgets the exhaustion: after an add the same call is asked of the record and passes
    const t2 = Date.now()
    expect(await spend(leases, k, 3, t2)).toEqual({ ok: false, remaining: 0, refillsAt: null })
    expect(spend(leases, k, 3, t2)).not.toBeInstanceOf(Promise) // remembered
    expect((await h.call('POST', `/v1/keys/${k.id}/credits`, { token: k.token, body: { operation: 'add', amount: 5 } })).status).toBe(200)
    await bus.publish({ kind: 'key', accountId: k.accountId, keyHash: k.keyHash })
    const renewed = spend(leases, k, 3, t2)
    expect(renewed).toBeInstanceOf(Promise)
    expect(await renewed).toMatchObject({ ok: true, remaining: 2 })
  })
})

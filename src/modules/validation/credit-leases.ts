// Metered validate without a Postgres round trip per call: each node holds a lease of credits per hot
// metered key, taken atomically from the key's record under its row lock (credits-repo.ts), and
// spends it from memory. Why it never over-grants: a credit is spent only from a lease, a lease only
// holds what was moved out of the record, and what a lease gives back is added once (its row goes in
// the same transaction); a lease of an older epoch (a `set` came since) gives nothing back.
//
// - Sized to demand and to what is left: about LEASE_SECONDS of this node's recent spending, never
//   more than a quarter of the record past the call's own need, so near zero the last credits go one
//   call at a time through Postgres, exactly, and no idle node sits on them.
// - Returned when idle (IDLE_MS without a spend), on shutdown, and when the key changes (any bus
//   message for it: the admin's add/subtract/set, PATCH, revoke...): dropped from memory at once
//   (before the node acknowledges), given back right after.
// - A node killed with -9 strands its leases: an under-grant of at most what they held (each at most
//   MAX_LEASE credits and a quarter of the balance when taken), never spent again.
// - While the bus is not trusted (NATS down) a `set` may not reach this node, so it spends no lease:
//   each call takes exactly its cost from the record.
import { randomUUID } from 'node:crypto'
import type { Bus } from '../../infra/bus'
import { UtcDayClock } from '../../infra/counters'
import type { Sql } from '../../infra/db'
import type { Logger } from '../../infra/log'
import { addConsumed, reportLeases, returnCredits, takeCredits, type Taken } from './credits-repo'
import { hotKeyOf, keyHashOf } from './hot/hot-state'

/** A lease covers about this many seconds of the node's recent spending on the key. */
const LEASE_SECONDS = 1
/** Most credits one lease holds. */
export const MAX_LEASE = 100_000
/** A lease unused this long is given back. */
const IDLE_MS = 5_000
/** After the record could not cover a call, a call costing more than was left is refused from memory this long (a key change clears it). */
const EXHAUSTED_MEMO_MS = 1_000

/** Where a spend came from, to refund it (refund): the lease itself, opaque outside this file. */
export type SpentFrom = object

export type Spent =
  | { ok: true; remaining: number | null; from?: SpentFrom }
  | { ok: false; remaining: number; refillsAt: string | null }

interface Lease {
  id: string
  keyId: string | null
  keyHash: string
  accountId: string
  productId: string
  epoch: number
  left: number
  /** the record as of the last take (what this node knows of the rest) */
  record: number
  refillsAt: string | null
  lastUsed: number
  /** demand: credits spent since `since` */
  spent: number
  since: number
  rate: number
  /** credits consumed not yet written to the analytics */
  consumed: number
  taking: Promise<Taken> | null
  exhaustedAt: number
  dropped: boolean
}

export class CreditLeases {
  private leases = new Map<string, Lease>()
  private returning = new Set<Promise<void>>()
  private clock = new UtcDayClock()
  /** Consumption of leases already ended, waiting for the next flush. */
  private ended: { account: string; product: string; key: string; n: number }[] = []
  private unsubscribe: () => void
  readonly nodeId = randomUUID()

  constructor(
    private sql: Sql,
    private bus: Bus,
    private log: Logger | null = null,
  ) {
    this.unsubscribe = bus.subscribe((msg) => {
      if (msg.kind === 'key') this.drop(hotKeyOf(msg.keyHash))
      else if (msg.kind === 'keys') for (const h of msg.keyHashes) this.drop(hotKeyOf(h))
      else if (msg.kind === 'resync') for (const hotKey of [...this.leases.keys()]) this.drop(hotKey)
    })
  }

  get size() {
    return this.leases.size
  }

  /**
   * Spends `cost` credits of the metered key (its hot-state key): from the lease when it covers the
   * cost (no I/O), else after a take from the record. Not ok: the balance is below the cost; nothing spent.
   */
  spend(hotKey: string, accountId: string, productId: string, cost: number, now: number): Spent | Promise<Spent> {
    let lease = this.leases.get(hotKey)
    if (lease === undefined) {
      lease = this.newLease(keyHashOf(hotKey), accountId, productId, now)
      this.leases.set(hotKey, lease)
    }
    if (cost === 0) {
      // checks without spending; a lease that never took knows nothing of the balance yet: read it once
      if (lease.keyId === null) return this.refill(hotKey, lease, 0)
      return { ok: true, remaining: lease.left + lease.record }
    }
    if (lease.left >= cost && this.bus.trusted(now)) return this.take(lease, cost, now)
    if (lease.exhaustedAt > now - EXHAUSTED_MEMO_MS && cost > lease.left + lease.record) return this.refused(lease)
    return this.refill(hotKey, lease, cost)
  }

  /**
   * Gives `cost` back to the lease it was spent from (the call was refused after all, e.g. by its
   * activation). A lease dropped meanwhile already gave back what it held: the cost stays spent (an
   * under-grant of one call), never added to another lease.
   */
  refund(from: SpentFrom | undefined, cost: number) {
    const lease = from as Lease | undefined
    if (lease === undefined || lease.dropped || cost === 0) return
    lease.left += cost
    lease.spent -= cost
    lease.consumed -= cost
  }

  private newLease(keyHash: string, accountId: string, productId: string, now: number): Lease {
    return {
      id: randomUUID(), keyId: null, keyHash, accountId, productId, epoch: 0, left: 0, record: 0, refillsAt: null,
      lastUsed: now, spent: 0, since: now, rate: 0, consumed: 0, taking: null, exhaustedAt: 0, dropped: false,
    }
  }

  private take(lease: Lease, cost: number, now: number): Spent {
    lease.left -= cost
    lease.spent += cost
    lease.consumed += cost
    lease.lastUsed = now
    return { ok: true, remaining: lease.left + lease.record, from: lease }
  }

  private refused(lease: Lease): Spent {
    return { ok: false, remaining: lease.left + lease.record, refillsAt: lease.refillsAt }
  }

  /** The lease does not cover `cost`: one take from the record at a time per key and node; others wait for it. */
  private async refill(hotKey: string, lease: Lease, cost: number): Promise<Spent> {
    for (;;) {
      if (lease.dropped) {
        // the key changed while this call waited: start again from a new lease
        const current = this.leases.get(hotKey)
        if (current === undefined) {
          lease = this.newLease(lease.keyHash, lease.accountId, lease.productId, Date.now())
          this.leases.set(hotKey, lease)
        } else lease = current
      }
      const now = Date.now()
      const trusted = this.bus.trusted(now)
      if (cost === 0 && lease.keyId !== null) return { ok: true, remaining: lease.left + lease.record }
      if (cost > 0 && lease.left >= cost && trusted) return this.take(lease, cost, now)
      if (lease.taking) {
        await lease.taking.catch(() => {})
        continue
      }
      if (!trusted && lease.left > 0) {
        // a `set` might not reach this node: give the lease back and take exactly what each call costs
        this.drop(hotKey)
        continue
      }
      const need = cost - lease.left
      const elapsed = Math.max(now - lease.since, 1)
      lease.rate = Math.max(lease.rate / 2, (lease.spent * 1000) / elapsed)
      lease.spent = 0
      lease.since = now
      const want = cost === 0 ? 0 : trusted ? Math.min(MAX_LEASE, Math.max(need, Math.ceil(lease.rate * LEASE_SECONDS))) : need
      const taking = takeCredits(this.sql, { keyHash: lease.keyHash, nodeId: this.nodeId, leaseId: lease.id, held: lease.left, need, want, now })
      lease.taking = taking
      let taken: Taken
      try {
        taken = await taking
      } finally {
        lease.taking = null
      }
      if (taken.kind === 'unmetered') return { ok: true, remaining: null }
      if (lease.dropped) {
        // dropped while taking: drop() gave back what the lease held before; what was just taken goes back now
        if (taken.taken > 0) this.giveBack({ ...lease, keyId: taken.keyId, epoch: taken.epoch, left: taken.taken, consumed: 0 })
        continue
      }
      lease.keyId = taken.keyId
      lease.epoch = taken.epoch
      lease.record = taken.record
      lease.refillsAt = taken.refillsAt === null ? null : new Date(taken.refillsAt).toISOString()
      lease.left += taken.taken
      if (cost === 0) return { ok: true, remaining: lease.left + lease.record }
      if (taken.taken === 0) {
        lease.exhaustedAt = Date.now()
        return this.refused(lease)
      }
      lease.exhaustedAt = 0
    }
  }

  /** The key changed (or this node stops trusting the bus): forget its lease now, give the rest back. */
  drop(hotKey: string) {
    const lease = this.leases.get(hotKey)
    if (lease === undefined) return
    this.leases.delete(hotKey)
    lease.dropped = true
    this.giveBack(lease)
  }

  private giveBack(lease: Lease) {
    if (lease.consumed > 0 && lease.keyId !== null) {
      this.ended.push({ account: lease.accountId, product: lease.productId, key: lease.keyId, n: lease.consumed })
      lease.consumed = 0
    }
    if (lease.keyId === null) return
    const done = returnCredits(this.sql, { keyId: lease.keyId, leaseId: lease.id, epoch: lease.epoch, unspent: lease.left })
      .catch((err) => this.log?.warn({ err: String(err) }, 'credit lease return failed: its credits stay stranded'))
      .finally(() => this.returning.delete(done))
    this.returning.add(done)
  }

  /**
   * The flush job: idle leases go back, the others' unspent credits are written (so GET /v1/keys/:id
   * is at most about two flush intervals behind), and the credits consumed reach the analytics.
   */
  async flush(now = Date.now()): Promise<void> {
    const live: { id: string; held: number }[] = []
    for (const [hotKey, lease] of this.leases) {
      if (lease.taking) continue
      if (now - lease.lastUsed > IDLE_MS) this.drop(hotKey)
      else if (lease.keyId !== null) live.push({ id: lease.id, held: lease.left })
    }
    const day = this.clock.at(now)
    const consumed = this.ended.splice(0)
    for (const lease of this.leases.values()) {
      if (lease.consumed > 0 && lease.keyId !== null) {
        consumed.push({ account: lease.accountId, product: lease.productId, key: lease.keyId, n: lease.consumed })
        lease.consumed = 0
      }
    }
    await reportLeases(this.sql, live)
    try {
      await addConsumed(this.sql, consumed.map((c) => ({ ...c, day })))
    } catch (err) {
      this.ended.push(...consumed) // counted again at the next flush
      throw err
    }
  }

  /** Shutdown: every lease goes back (and the consumption is written). */
  async close(): Promise<void> {
    this.unsubscribe()
    for (const hotKey of [...this.leases.keys()]) this.drop(hotKey)
    await Promise.allSettled([...this.returning])
    await this.flush().catch(() => {})
  }
}

// Cluster `Counters` on Redis, shared by every node. This file decides; the Redis side (keys, scripts,
// epochs) is redis-quota-store.ts and the replay of counts into Postgres is daily-calls-replay.ts.
// A node *reserves* calls from an account's daily quota (a script grants at most what is left) and
// spends them in memory, so the request path does no I/O until they run out (the next reservation is
// fetched ahead of need). Reservations shrink as the limit nears (1/16 of what is left, down to one
// call), so the limit holds exactly across any number of nodes; idle nodes give unspent calls back at
// the next flush.
// Redis down (or slow): bounded command timeouts, no offline queue; the node decides locally against
// the last total it knew and adds those calls to both keys when Redis is back. Never a 5xx, never a hang.
// Redis restarted empty (or flushed): it is in a new epoch, and every node joins it with what it holds
// (calls not yet in Postgres, calls not yet flushed, calls reserved and unspent) on top of the day's
// total in Postgres: the quota is exact again, nothing lost and nothing counted twice.
import { UtcDayClock, type CounterState, type Counters } from './counters'
import { DailyCallsReplay, type Unpersisted } from './daily-calls-replay'
import type { Sql } from './db'
import type { Logger } from './log'
import { counterFlushLag } from './metrics'
import { MISSING, OTHER_EPOCH, QuotaStore, type DayRef } from './redis-quota-store'

const MAX_RESERVE = 1_000
const RESERVE_DIVISOR = 16

/** One account's calls on one UTC day, as this node holds them. */
interface AccountDay extends DayRef, Unpersisted {
  /** Calls reserved in the quota key and not yet spent. */
  reserved: number
  /** Calls granted and not yet added to the calls key. */
  pending: number
  /** Calls granted without a reservation (Redis was down): still to be added to the quota key. */
  unreserved: number
  /** Last quota total Redis told us (for local decisions while it is down). */
  knownQuota: number
  /** Last calls total Redis told us (for api_calls_today while it is down). */
  knownCalls: number
  lastReserved: number
  limit: number | null
  touched: boolean
  reserving: Promise<Reserved> | null
}

/** A reservation's outcome: calls reserved (0: the limit is reached), Redis failed, or a new epoch. */
type Reserved = number | 'error' | 'rejoin'

export interface RedisCountersOptions {
  url: string
  log: Logger
  /** Upper bound for any one Redis command (a stalled Redis must not stall a validate). */
  commandTimeoutMs?: number
  connectWaitMs?: number
  /** Where the day's totals are persisted and restored from (none: Redis alone, as in some tests). */
  sql?: Sql
}

export class RedisCounters implements Counters {
  private days = new Map<string, AccountDay>()
  /** Past days with counts still to flush or persist. */
  private retired: AccountDay[] = []
  private lastFlushOk = Date.now()
  /** After a failed or timed-out command, requests skip Redis for a moment instead of each waiting out a timeout. */
  private suspectUntil = 0
  private clock = new UtcDayClock()
  /** The newest epoch this node saw Redis in: a new account-day starts there ('' before the first). */
  private epoch = ''
  /** Flushes and joins run one at a time: both move counts between this node's memory and Redis. */
  private queue: Promise<unknown> = Promise.resolve()
  private joining: Promise<boolean> | null = null

  private constructor(
    private store: QuotaStore,
    private replay: DailyCallsReplay,
    private log: Logger,
  ) {}

  static async start(opts: RedisCountersOptions): Promise<RedisCounters> {
    const store = QuotaStore.connect(opts.url, opts.commandTimeoutMs ?? 250)
    const counters = new RedisCounters(store, new DailyCallsReplay(opts.sql ?? null, opts.log), opts.log)
    let wasUp = false
    store.redis.on('ready', () => {
      wasUp = true
      opts.log.info('redis counters connected')
      void counters.rejoin() // a Redis that restarted empty is in a new epoch: bring this node's counts
    })
    store.redis.on('error', (err) => {
      if (wasUp) opts.log.warn({ err: String(err) }, 'redis counters unavailable; counting locally')
      wasUp = false
    })
    const ready = new Promise<void>((r) => store.redis.once('ready', () => r()))
    const wait = new Promise<void>((r) => setTimeout(r, opts.connectWaitMs ?? 3_000))
    await Promise.race([ready, wait])
    if (!store.ready()) opts.log.warn({ url: '[redis]' }, 'Redis unreachable at startup; counting locally until it connects')
    else await counters.joining
    return counters
  }

  private up() {
    return this.store.ready() && Date.now() >= this.suspectUntil
  }

  private accountDay(account: string, now = Date.now()): AccountDay {
    const day = this.clock.at(now)
    let d = this.days.get(account)
    if (d && d.day !== day) {
      this.keepPast(d) // yesterday's calls still get counted
      d = undefined
    }
    if (!d) {
      d = { day, account, epoch: this.epoch, reserved: 0, pending: 0, unreserved: 0, knownQuota: 0, knownCalls: 0, unpersisted: 0,
        replaying: 0, lastReserved: 0, limit: null, touched: false, reserving: null }
      this.days.set(account, d)
    }
    return d
  }

  /** Keeps a day that is no longer today's while it has counts to flush or persist. */
  private keepPast(d: AccountDay) {
    const owes = d.pending > 0 || d.unreserved > 0 || d.unpersisted > 0 || d.replaying > 0
    if (owes && this.days.get(d.account) !== d && !this.retired.includes(d)) this.retired.push(d)
  }

  take(accountId: string, limit: number | null, now = Date.now()): boolean | Promise<boolean> {
    const d = this.accountDay(accountId, now)
    d.touched = true
    d.limit = limit
    d.pending++
    if (limit === null) return true
    if (d.reserved > 0) {
      d.reserved--
      // Fetch the next reservation before this one runs out, so hot accounts never wait on Redis.
      if (d.reserved * 4 < d.lastReserved && !d.reserving && this.up()) {
        void this.reserve(d, limit).then((r) => r === 'rejoin' && this.rejoin())
      }
      return true
    }
    d.pending-- // counted again below once a reserved call is found
    return this.takeSlow(d, limit)
  }

  private async takeSlow(d: AccountDay, limit: number): Promise<boolean> {
    for (let joins = 0; ; ) {
      if (d.reserved > 0) {
        d.reserved--
        d.pending++
        return true
      }
      if (!this.up()) return this.takeLocally(d, limit)
      if (this.joining) await this.joining
      const got = await (d.reserving ?? this.reserve(d, limit))
      if (got === 'rejoin') {
        if (joins++ > 2 || !(await this.rejoin())) return this.takeLocally(d, limit)
        continue
      }
      if (got === 'error') return this.takeLocally(d, limit)
      if (got === 0 && d.reserved === 0) return false
    }
  }

  /** Redis unreachable: decide against the last known total plus what this node granted since. */
  private takeLocally(d: AccountDay, limit: number): boolean {
    if (d.knownQuota + d.unreserved >= limit) return false
    d.unreserved++
    d.pending++
    return true
  }

  private reserve(d: AccountDay, limit: number): Promise<Reserved> {
    const run = async (): Promise<Reserved> => {
      let [got, quota] = await this.store.reserve(d, limit, RESERVE_DIVISOR, MAX_RESERVE)
      if (got === MISSING) {
        await this.create(d)
        ;[got, quota] = await this.store.reserve(d, limit, RESERVE_DIVISOR, MAX_RESERVE)
      }
      if (got === OTHER_EPOCH) return 'rejoin'
      if (got < 0) throw new Error('quota key still missing after its creation')
      d.reserved += got
      d.lastReserved = got
      d.knownQuota = quota
      return got
    }
    d.reserving = run()
      .catch(() => {
        this.suspectUntil = Date.now() + 1_000
        return 'error' as const
      })
      .finally(() => (d.reserving = null))
    return d.reserving
  }

  /**
   * Creates a day's missing keys in its epoch, where nothing was counted for it yet: from the day's total
   * in Postgres (plus what this node stored in Redis and not yet in Postgres, were the keys evicted).
   */
  private async create(d: AccountDay): Promise<void> {
    const persisted = await this.replay.totals([d])
    await this.store.join(d, d.epoch, persisted(d) + d.unpersisted, 0, 0)
  }

  async today(accountId: string): Promise<number> {
    const d = this.accountDay(accountId)
    if (this.up()) {
      const read = () => this.store.calls(d).catch(() => null)
      let calls = await read()
      if (calls === OTHER_EPOCH && (await this.rejoin())) calls = await read()
      if (calls === MISSING) calls = await this.create(d).then(read, () => null)
      if (calls !== null && calls >= 0) d.knownCalls = calls
    }
    return d.knownCalls + d.pending
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn)
    this.queue = run.catch(() => {})
    return run
  }

  /** Joins Redis's current epoch with every account-day counted in another; false when it could not. */
  private rejoin(): Promise<boolean> {
    this.joining ??= this.exclusive(() => this.joinAll()).finally(() => (this.joining = null))
    return this.joining
  }

  /**
   * For each account-day of another epoch: its keys are created from the day's total in Postgres if no
   * node did so yet, then this node adds every call it granted that Postgres does not hold (stored in
   * the old epoch's Redis, or not flushed yet) and its unspent reserved calls to the quota, and the
   * first part to the calls key (the rest is `pending` and flushed as usual). Runs between flushes.
   */
  private async joinAll(): Promise<boolean> {
    try {
      const epoch = await this.store.epoch()
      this.epoch = epoch
      const stale = [...this.retired, ...this.days.values()].filter((d) => d.epoch !== epoch)
      if (stale.length === 0) return true
      await Promise.all(stale.map((d) => d.reserving)) // a reservation in flight lands (or fails) first
      await this.replay.settled() // this node's last batch is in Postgres (or unpersisted again) before the read
      const persisted = await this.replay.totals(stale)
      for (const d of stale) {
        const unreserved = d.unreserved // granted meanwhile without a reservation: still owed to the quota
        const [quota, calls] = await this.store.join(d, epoch, persisted(d), d.unpersisted + d.pending + d.reserved, d.unpersisted)
        if (quota === OTHER_EPOCH) return false // restarted again: the next join brings everything
        d.epoch = epoch
        d.unreserved -= unreserved
        d.knownQuota = quota
        d.knownCalls = calls
      }
      return true
    } catch (err) {
      // Redis or Postgres failed: this node keeps counting locally and joins at a later flush
      this.log.warn({ err: String(err) }, 'redis counters: could not join the current epoch yet; counting locally')
      this.suspectUntil = Date.now() + 1_000
      return false
    }
  }

  /**
   * Adds local counts to Redis in one pipeline and gives back the reserved calls of idle accounts; then,
   * without waiting, adds what Redis took to Postgres. A day found in another epoch (Redis restarted
   * empty) joins the new one; a missing day key is created; their counts go in the next flush.
   */
  flush(): Promise<void> {
    return this.exclusive(() => this.flushNow())
  }

  private async flushNow(): Promise<void> {
    counterFlushLag.set((Date.now() - this.lastFlushOk) / 1000)
    if (!this.store.ready()) return // the flush itself probes a suspect Redis
    const batch = this.store.batch()
    const sent: { d: AccountDay; calls: number; unreserved: number; giveBack: number; callsAt: number; quotaAt: number; giveBackAt: number }[] = []
    for (const d of [...this.retired, ...this.days.values()]) {
      const giveBack = !d.touched && d.reserved > 0 && !d.reserving ? d.reserved : 0
      d.touched = false
      if (d.pending === 0 && d.unreserved === 0 && giveBack === 0) continue
      sent.push({
        d,
        calls: d.pending,
        unreserved: d.unreserved,
        giveBack,
        callsAt: d.pending > 0 ? batch.addCalls(d, d.pending) : -1,
        quotaAt: d.unreserved > 0 ? batch.addQuota(d, d.unreserved) : -1,
        giveBackAt: giveBack > 0 ? batch.giveBack(d, giveBack) : -1,
      })
      d.pending = 0
      d.unreserved = 0
      d.reserved -= giveBack
    }
    if (sent.length > 0) {
      const answers = await batch.run()
      if (!answers) {
        // Not (fully) stored: everything goes back for the next flush (or into a new epoch, if Redis
        // restarted). A reply lost after Redis applied a command counts that batch twice (calls given
        // back: spent twice), a rare cost of never losing counts when Redis is the one that failed.
        this.suspectUntil = Date.now() + 1_000
        for (const x of sent) {
          x.d.pending += x.calls
          x.d.unreserved += x.unreserved
          x.d.reserved += x.giveBack
          this.keepPast(x.d)
        }
        return
      }
      const answer = (at: number) => (at >= 0 ? answers[at]! : 0)
      let rejoin = false
      const missing: AccountDay[] = []
      for (const x of sent) {
        const [calls, quota, given] = [answer(x.callsAt), answer(x.quotaAt), answer(x.giveBackAt)]
        if (calls < 0) x.d.pending += x.calls
        if (quota < 0) x.d.unreserved += x.unreserved
        if (given < 0) x.d.reserved += x.giveBack // still this node's: it joins the new epoch with them
        if (calls === OTHER_EPOCH || quota === OTHER_EPOCH || given === OTHER_EPOCH) rejoin = true
        else if (calls === MISSING || quota === MISSING) missing.push(x.d)
        if (calls > 0) {
          x.d.knownCalls = calls
          x.d.unpersisted += x.calls
        }
        if (quota > 0) x.d.knownQuota = quota
        this.keepPast(x.d)
      }
      if (rejoin) await this.joinAll()
      for (const d of missing) await this.create(d).catch(() => {})
    }
    // A batch already in flight: the days keep their unpersisted calls for the next flush.
    this.replay.start([...this.retired, ...this.days.values()])
    this.retired = this.retired.filter((d) => d.pending > 0 || d.unreserved > 0 || d.unpersisted > 0 || d.replaying > 0)
    this.suspectUntil = 0
    this.lastFlushOk = Date.now()
    counterFlushLag.set(0)
  }

  state(): CounterState {
    return this.up() ? 'ok' : 'down'
  }

  /** Flushes, hands every unspent reserved call back, and disconnects (all bounded). */
  async close(): Promise<void> {
    for (const d of this.days.values()) d.touched = false
    await this.flush().catch(() => {})
    await this.replay.settled()
    this.store.disconnect()
  }
}

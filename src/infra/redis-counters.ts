// Cluster `Counters` on Redis, shared by every node. Two keys per account and UTC day:
//   keyward:calls:<day>:<account>  calls counted (api_calls_today): local counts added in batches
//   keyward:quota:<day>:<account>  calls counted + slots leased to nodes: never exceeds the daily limit
// A node takes a *lease* of slots (a Lua script grants at most what is left) and spends it in memory,
// so the request path does no I/O until the lease runs out (the next one is fetched ahead of need).
// Leases shrink as the limit nears (1/16 of what is left, down to one slot), so the limit holds
// exactly across any number of nodes; idle nodes give unused slots back at the next flush.
// Redis down (or slow): bounded command timeouts, no offline queue; the node counts locally against
// the last total it knew and adds those calls to both keys when Redis is back. Never a 5xx, never a hang.
// Redis restarted empty: the keys are only ever created by a restore (from the day's total in Postgres,
// which each flush adds to, and what this node last knew); reserving from or adding to a missing key
// reports it instead of starting from zero, so a restart never hands out a fresh quota.
import Redis from 'ioredis'
import { loadDailyCalls, persistDailyCalls, UtcDayClock, type CounterState, type Counters } from './counters'
import type { Sql } from './db'
import type { Logger } from './log'
import { counterFlushLag } from './metrics'

const TTL_S = 2 * 86_400
const MAX_LEASE = 1_000
const LEASE_DIVISOR = 16

// KEYS[1] quota  ARGV: limit, divisor, max lease, ttl  → {granted, quota after}; {-1, 0}: key missing
const RESERVE = `
local v = redis.call('GET', KEYS[1])
if not v then return {-1, 0} end
local q = tonumber(v)
local rest = tonumber(ARGV[1]) - q
if rest <= 0 then return {0, q} end
local want = math.floor(rest / tonumber(ARGV[2]))
if want < 1 then want = 1 end
if want > tonumber(ARGV[3]) then want = tonumber(ARGV[3]) end
q = redis.call('INCRBY', KEYS[1], want)
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {want, q}`

// KEYS[1] counter  ARGV: n, ttl  → the new total; -1: key missing (nothing added)
const ADD = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return v`

// KEYS quota, calls  ARGV: quota floor, calls floor, ttl. Creates missing keys only (another node may
// have restored them first).
const RESTORE = `
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3]) end
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
return 1`

// KEYS[1] quota  ARGV: slots to give back (never below zero)
const RELEASE = `
local q = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = math.min(q, tonumber(ARGV[1]))
if n > 0 then redis.call('DECRBY', KEYS[1], n) end
return n`

interface Slot {
  day: string
  account: string
  /** Leased slots not yet spent (already counted in the quota key). */
  lease: number
  /** Calls granted and not yet added to the calls key. */
  pending: number
  /** Calls granted without a lease (Redis was down): still to be added to the quota key. */
  unleased: number
  /** Last quota total Redis told us (for local decisions while it is down). */
  knownQuota: number
  /** Last calls total Redis told us (for api_calls_today while it is down). */
  knownCalls: number
  /** Calls stored in Redis but not yet added to Postgres. */
  unpersisted: number
  lastLease: number
  limit: number | null
  touched: boolean
  reserving: Promise<number | 'error'> | null
}

export interface RedisCountersOptions {
  url: string
  log: Logger
  /** Upper bound for any one Redis command (a stalled Redis must not stall a validate). */
  commandTimeoutMs?: number
  connectWaitMs?: number
  /** Where the day's totals are persisted and restored from (none: Redis alone, as in some tests). */
  sql?: Sql
}

type RedisWithScripts = Redis & {
  kwReserve(key: string, limit: number, divisor: number, max: number, ttl: number): Promise<[number, number]>
  kwRelease(key: string, n: number): Promise<number>
  kwRestore(quota: string, calls: string, quotaFloor: number, callsFloor: number, ttl: number): Promise<number>
}
type Pipeline = ReturnType<Redis['pipeline']> & {
  kwAdd(key: string, n: number, ttl: number): Pipeline
  kwRelease(key: string, n: number): Pipeline
}

export class RedisCounters implements Counters {
  private slots = new Map<string, Slot>()
  /** Slots of past days with counts still to flush. */
  private retired: Slot[] = []
  private lastFlushOk = Date.now()
  /** After a failed or timed-out command, requests skip Redis for a moment instead of each waiting out a timeout. */
  private suspectUntil = 0

  /** Postgres persistence in flight (not awaited by the Redis flush: a slow Postgres must not hold it). */
  private persisting: Promise<void> | null = null

  private constructor(
    private redis: RedisWithScripts,
    private log: Logger,
    private sql: Sql | null,
  ) {}

  static async start(opts: RedisCountersOptions): Promise<RedisCounters> {
    const redis = new Redis(opts.url, {
      enableOfflineQueue: false, // fail at once while disconnected, never queue without bound
      maxRetriesPerRequest: 0,
      commandTimeout: opts.commandTimeoutMs ?? 250,
      connectTimeout: 1_000,
      retryStrategy: (times) => Math.min(100 * times, 1_000), // reconnect forever
      lazyConnect: false,
    }) as RedisWithScripts
    redis.defineCommand('kwReserve', { numberOfKeys: 1, lua: RESERVE })
    redis.defineCommand('kwRelease', { numberOfKeys: 1, lua: RELEASE })
    redis.defineCommand('kwAdd', { numberOfKeys: 1, lua: ADD })
    redis.defineCommand('kwRestore', { numberOfKeys: 2, lua: RESTORE })
    const counters = new RedisCounters(redis, opts.log, opts.sql ?? null)
    let wasUp = false
    redis.on('ready', () => {
      wasUp = true
      opts.log.info('redis counters connected')
    })
    redis.on('error', (err) => {
      if (wasUp) opts.log.warn({ err: String(err) }, 'redis counters unavailable; counting locally')
      wasUp = false
    })
    const ready = new Promise<void>((r) => redis.once('ready', () => r()))
    const wait = new Promise<void>((r) => setTimeout(r, opts.connectWaitMs ?? 3_000))
    await Promise.race([ready, wait])
    if (redis.status !== 'ready') opts.log.warn({ url: '[redis]' }, 'Redis unreachable at startup; counting locally until it connects')
    return counters
  }

  private up() {
    return this.redis.status === 'ready' && Date.now() >= this.suspectUntil
  }

  private clock = new UtcDayClock()

  private slot(account: string, now = Date.now()): Slot {
    const day = this.clock.at(now)
    let s = this.slots.get(account)
    if (s && s.day !== day) {
      if (s.pending > 0 || s.unpersisted > 0) this.retired.push(s) // yesterday's calls still get counted
      s = undefined
    }
    if (!s) {
      s = { day, account, lease: 0, pending: 0, unleased: 0, knownQuota: 0, knownCalls: 0, unpersisted: 0, lastLease: 0, limit: null, touched: false, reserving: null }
      this.slots.set(account, s)
    }
    return s
  }

  take(accountId: string, limit: number | null, now = Date.now()): boolean | Promise<boolean> {
    const s = this.slot(accountId, now)
    s.touched = true
    s.limit = limit
    s.pending++
    if (limit === null) return true
    if (s.lease > 0) {
      s.lease--
      // Fetch the next lease before this one runs out, so hot accounts never wait on Redis.
      if (s.lease * 4 < s.lastLease && !s.reserving && this.up()) void this.reserve(s, limit)
      return true
    }
    s.pending-- // counted again below once a slot is found
    return this.takeSlow(s, limit)
  }

  private async takeSlow(s: Slot, limit: number): Promise<boolean> {
    for (;;) {
      if (s.lease > 0) {
        s.lease--
        s.pending++
        return true
      }
      if (!this.up()) return this.takeLocally(s, limit)
      const granted = await (s.reserving ?? this.reserve(s, limit))
      if (granted === 'error') return this.takeLocally(s, limit)
      if (granted === 0 && s.lease === 0) return false
    }
  }

  /** Redis unreachable: decide against the last known total plus what this node granted since. */
  private takeLocally(s: Slot, limit: number): boolean {
    if (s.knownQuota + s.unleased >= limit) return false
    s.unleased++
    s.pending++
    return true
  }

  private reserve(s: Slot, limit: number): Promise<number | 'error'> {
    const quotaKey = `keyward:quota:${s.day}:${s.account}`
    s.reserving = this.redis
      .kwReserve(quotaKey, limit, LEASE_DIVISOR, MAX_LEASE, TTL_S)
      .then(async (answer) => {
        if (answer[0] >= 0) return answer
        await this.restore([s])
        const again = await this.redis.kwReserve(quotaKey, limit, LEASE_DIVISOR, MAX_LEASE, TTL_S)
        if (again[0] < 0) throw new Error('quota key still missing after its restore')
        return again
      })
      .then(([granted, quota]) => {
        s.lease += granted
        s.lastLease = granted
        s.knownQuota = quota
        return granted
      })
      .catch(() => {
        this.suspectUntil = Date.now() + 1_000
        return 'error' as const
      })
      .finally(() => (s.reserving = null))
    return s.reserving
  }

  async today(accountId: string): Promise<number> {
    const s = this.slot(accountId)
    const key = `keyward:calls:${s.day}:${accountId}`
    let stored = this.up() ? await this.redis.get(key).catch(() => undefined) : undefined
    if (stored === null) stored = await this.restore([s]).then(() => this.redis.get(key)).catch(() => undefined)
    if (stored !== undefined) s.knownCalls = Number(stored ?? 0)
    return s.knownCalls + s.pending
  }

  /**
   * Creates the missing Redis keys of `slots` from the larger of the day's total in Postgres and what
   * this node last knew. Without Postgres (down, or none configured) this node's knowledge alone.
   */
  private async restore(slots: Slot[]): Promise<void> {
    const persisted = new Map<string, Map<string, number>>()
    if (this.sql) {
      for (const day of new Set(slots.map((s) => s.day))) {
        const accounts = slots.filter((s) => s.day === day).map((s) => s.account)
        const totals = await loadDailyCalls(this.sql, day, accounts).catch((err) => {
          this.log.warn({ err: String(err) }, 'daily call totals unreadable; restoring Redis counters from memory')
          return new Map<string, number>()
        })
        persisted.set(day, totals)
      }
    }
    for (const s of slots) {
      const stored = persisted.get(s.day)?.get(s.account) ?? 0
      // Calls counted here but not in Postgres yet are in Redis's lost total too: add them back.
      const calls = Math.max(stored + s.unpersisted, s.knownCalls)
      await this.redis.kwRestore(`keyward:quota:${s.day}:${s.account}`, `keyward:calls:${s.day}:${s.account}`,
        Math.max(calls, s.knownQuota), calls, TTL_S)
    }
  }

  /**
   * Adds local counts to Redis in one pipeline and gives back the leases of idle accounts; then, without
   * waiting, adds what Redis took to Postgres. A key found missing (Redis restarted empty) is restored
   * and its counts go in the next flush.
   */
  async flush(): Promise<void> {
    counterFlushLag.set((Date.now() - this.lastFlushOk) / 1000)
    if (this.redis.status !== 'ready') return // the flush itself probes a suspect Redis
    const batch: { s: Slot; calls: number; unleased: number; release: number; callsAt: number; quotaAt: number }[] = []
    for (const s of [...this.retired, ...this.slots.values()]) {
      const release = !s.touched && s.lease > 0 && !s.reserving ? s.lease : 0
      if (s.pending === 0 && s.unleased === 0 && release === 0) {
        s.touched = false
        continue
      }
      batch.push({ s, calls: s.pending, unleased: s.unleased, release, callsAt: -1, quotaAt: -1 })
      s.pending = 0
      s.unleased = 0
      s.lease -= release
      s.touched = false
    }
    const retired = this.retired
    this.retired = []
    const putBack = (b: (typeof batch)[number], calls: boolean, quota: boolean) => {
      const { s } = b
      if (calls) s.pending += b.calls
      if (quota) s.unleased += b.unleased
      if (s.day !== this.clock.at() && !this.retired.includes(s)) this.retired.push(s)
    }
    if (batch.length > 0) {
      const p = this.redis.pipeline() as Pipeline
      let n = 0
      for (const b of batch) {
        const { s, calls, unleased, release } = b
        if (calls > 0) (b.callsAt = n++), p.kwAdd(`keyward:calls:${s.day}:${s.account}`, calls, TTL_S)
        if (unleased > 0) (b.quotaAt = n++), p.kwAdd(`keyward:quota:${s.day}:${s.account}`, unleased, TTL_S)
        if (release > 0) n++, p.kwRelease(`keyward:quota:${s.day}:${s.account}`, release)
      }
      const results = await p.exec().catch((err: unknown) => [[err, null]] as [unknown, unknown][])
      if (!results || results.some(([err]) => err)) {
        // Not (fully) stored: put the counts back for the next flush. A reply lost after Redis applied
        // a command may count a batch twice; over-counting is the safe side for a quota. (An unspent
        // lease given back is not put back: keeping it would count it twice.)
        this.suspectUntil = Date.now() + 1_000
        for (const b of batch) {
          putBack(b, true, true)
          b.s.lease += b.release
        }
        return
      }
      const missing: Slot[] = []
      for (const b of batch) {
        const calls = b.callsAt >= 0 ? Number(results[b.callsAt]![1]) : 0
        const quota = b.quotaAt >= 0 ? Number(results[b.quotaAt]![1]) : 0
        if (calls < 0 || quota < 0) {
          missing.push(b.s)
          putBack(b, calls < 0, quota < 0)
        }
        if (calls > 0) {
          b.s.knownCalls = calls
          b.s.unpersisted += b.calls
        }
        if (quota > 0) b.s.knownQuota = quota
      }
      if (missing.length > 0) await this.restore(missing).catch(() => {})
    }
    this.persist([...retired, ...this.slots.values()])
    this.suspectUntil = 0
    this.lastFlushOk = Date.now()
    counterFlushLag.set(0)
  }

  /** Adds the calls Redis holds but Postgres does not yet; one batch in flight at a time. */
  private persist(slots: Slot[]) {
    if (!this.sql) return
    if (this.persisting) {
      // a past day's slot is tracked only through `retired`: keep it there for the next try
      for (const s of slots) if (s.unpersisted > 0 && s.day !== this.clock.at() && !this.retired.includes(s)) this.retired.push(s)
      return
    }
    const sent = slots.filter((s) => s.unpersisted > 0).map((s) => ({ s, calls: s.unpersisted }))
    if (sent.length === 0) return
    for (const x of sent) x.s.unpersisted -= x.calls
    this.persisting = persistDailyCalls(this.sql, sent.map(({ s, calls }) => ({ account: s.account, day: s.day, calls })))
      .catch((err) => {
        for (const x of sent) {
          x.s.unpersisted += x.calls
          if (x.s.day !== this.clock.at() && !this.retired.includes(x.s)) this.retired.push(x.s)
        }
        this.log.warn({ err: String(err) }, 'daily call totals not persisted; retrying at the next flush')
      })
      .finally(() => (this.persisting = null))
  }

  state(): CounterState {
    return this.up() ? 'ok' : 'down'
  }

  /** Flushes, hands every unspent lease back, and disconnects (all bounded). */
  async close(): Promise<void> {
    for (const s of this.slots.values()) s.touched = false
    await this.flush().catch(() => {})
    await this.persisting
    this.redis.disconnect()
  }
}

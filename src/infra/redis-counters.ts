// Cluster `Counters` on Redis, shared by every node. Two keys per account and UTC day:
//   keyward:calls:<day>:<account>  calls counted (api_calls_today): local counts added in batches
//   keyward:quota:<day>:<account>  calls counted + slots leased to nodes: never exceeds the daily limit
// A node takes a *lease* of slots (a Lua script grants at most what is left) and spends it in memory,
// so the request path does no I/O until the lease runs out (the next one is fetched ahead of need).
// Leases shrink as the limit nears (1/16 of what is left, down to one slot), so the limit holds
// exactly across any number of nodes; idle nodes give unused slots back at the next flush.
// Redis down (or slow): bounded command timeouts, no offline queue; the node counts locally against
// the last total it knew and adds those calls to both keys when Redis is back. Never a 5xx, never a hang.
import Redis from 'ioredis'
import { UtcDayClock, type CounterState, type Counters } from './counters'
import type { Logger } from './log'
import { counterFlushLag } from './metrics'

const TTL_S = 2 * 86_400
const MAX_LEASE = 1_000
const LEASE_DIVISOR = 16

// KEYS[1] quota  ARGV: limit, divisor, max lease, ttl  → {granted, quota after}
const RESERVE = `
local q = tonumber(redis.call('GET', KEYS[1]) or '0')
local rest = tonumber(ARGV[1]) - q
if rest <= 0 then return {0, q} end
local want = math.floor(rest / tonumber(ARGV[2]))
if want < 1 then want = 1 end
if want > tonumber(ARGV[3]) then want = tonumber(ARGV[3]) end
q = redis.call('INCRBY', KEYS[1], want)
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {want, q}`

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
}

type RedisWithScripts = Redis & {
  kwReserve(key: string, limit: number, divisor: number, max: number, ttl: number): Promise<[number, number]>
  kwRelease(key: string, n: number): Promise<number>
}

export class RedisCounters implements Counters {
  private slots = new Map<string, Slot>()
  /** Slots of past days with counts still to flush. */
  private retired: Slot[] = []
  private lastFlushOk = Date.now()
  /** After a failed or timed-out command, requests skip Redis for a moment instead of each waiting out a timeout. */
  private suspectUntil = 0

  private constructor(
    private redis: RedisWithScripts,
    private log: Logger,
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
    const counters = new RedisCounters(redis, opts.log)
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
      if (s.pending > 0) this.retired.push(s) // yesterday's calls still get counted
      s = undefined
    }
    if (!s) {
      s = { day, account, lease: 0, pending: 0, unleased: 0, knownQuota: 0, knownCalls: 0, lastLease: 0, limit: null, touched: false, reserving: null }
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
    s.reserving = this.redis
      .kwReserve(`keyward:quota:${s.day}:${s.account}`, limit, LEASE_DIVISOR, MAX_LEASE, TTL_S)
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
    const stored = this.up() ? await this.redis.get(`keyward:calls:${s.day}:${accountId}`).catch(() => undefined) : undefined
    if (stored !== undefined) s.knownCalls = Number(stored ?? 0)
    return s.knownCalls + s.pending
  }

  /** Adds local counts to Redis in one pipeline and gives back the leases of idle accounts. */
  async flush(): Promise<void> {
    counterFlushLag.set((Date.now() - this.lastFlushOk) / 1000)
    if (this.redis.status !== 'ready') return // the flush itself probes a suspect Redis
    const batch: { s: Slot; calls: number; unleased: number; release: number; at: number }[] = []
    for (const s of [...this.retired, ...this.slots.values()]) {
      const release = !s.touched && s.lease > 0 && !s.reserving ? s.lease : 0
      if (s.pending === 0 && s.unleased === 0 && release === 0) {
        s.touched = false
        continue
      }
      batch.push({ s, calls: s.pending, unleased: s.unleased, release, at: -1 })
      s.pending = 0
      s.unleased = 0
      s.lease -= release
      s.touched = false
    }
    this.retired = []
    if (batch.length > 0) {
      const p = this.redis.pipeline()
      let n = 0
      for (const b of batch) {
        const { s, calls, unleased, release } = b
        const calls_ = `keyward:calls:${s.day}:${s.account}`
        const quota = `keyward:quota:${s.day}:${s.account}`
        if (calls > 0) {
          b.at = n
          n += 2
          p.incrby(calls_, calls).expire(calls_, TTL_S)
        }
        if (unleased > 0) n += 2
        if (release > 0) n += 1
        if (unleased > 0) p.incrby(quota, unleased).expire(quota, TTL_S)
        if (release > 0) (p as unknown as { kwRelease(k: string, n: number): unknown }).kwRelease(quota, release)
      }
      const results = await p.exec().catch((err: unknown) => [[err, null]] as [unknown, unknown][])
      if (!results || results.some(([err]) => err)) {
        // Not (fully) stored: put the counts back for the next flush. A reply lost after Redis applied
        // a command may count a batch twice; over-counting is the safe side for a quota.
        this.suspectUntil = Date.now() + 1_000
        for (const { s, calls, unleased, release } of batch) {
          s.pending += calls
          s.unleased += unleased
          s.lease += release
          if (s.day !== this.clock.at() && !this.retired.includes(s)) this.retired.push(s)
        }
        return
      }
      for (const b of batch) if (b.at >= 0) b.s.knownCalls = Number(results[b.at]![1])
    }
    this.suspectUntil = 0
    this.lastFlushOk = Date.now()
    counterFlushLag.set(0)
  }

  state(): CounterState {
    return this.up() ? 'ok' : 'down'
  }

  /** Flushes, hands every unspent lease back, and disconnects (all bounded). */
  async close(): Promise<void> {
    for (const s of this.slots.values()) s.touched = false
    await this.flush().catch(() => {})
    this.redis.disconnect()
  }
}

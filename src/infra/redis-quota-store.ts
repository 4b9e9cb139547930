// The Redis side of the cluster counters (redis-counters.ts decides; daily-calls-replay.ts writes
// Postgres). Keys, one place:
//   keyward:counters:epoch         this Redis's generation: a random id, created when missing
//   keyward:calls:<day>:<account>  calls counted (api_calls_today)
//   keyward:quota:<day>:<account>  calls counted + calls reserved by nodes: never exceeds the daily limit
// Every script names the epoch its caller's counts belong to and changes nothing when Redis holds
// another (it restarted empty, or was flushed): the caller first joins the new epoch, adding what it
// holds (see `join`), so no count is lost or added twice. A day key missing in the caller's epoch has
// never been written in it: it is created from the day's total in Postgres (`create`).
import Redis from 'ioredis'

const TTL_S = 2 * 86_400
/** Script answers: the caller's epoch is not Redis's (join first); the day key is missing (create it). */
export const OTHER_EPOCH = -2
export const MISSING = -1

export const keys = {
  epoch: 'keyward:counters:epoch',
  calls: (day: string, account: string) => `keyward:calls:${day}:${account}`,
  quota: (day: string, account: string) => `keyward:quota:${day}:${account}`,
}

const SAME_EPOCH = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-2, 0} end`

// KEYS epoch, quota  ARGV epoch, limit, divisor, max reserve, ttl → {reserved, quota after}
const RESERVE = `${SAME_EPOCH}
local v = redis.call('GET', KEYS[2])
if not v then return {-1, 0} end
local q = tonumber(v)
local rest = tonumber(ARGV[2]) - q
if rest <= 0 then return {0, q} end
local want = math.floor(rest / tonumber(ARGV[3]))
if want < 1 then want = 1 end
if want > tonumber(ARGV[4]) then want = tonumber(ARGV[4]) end
q = redis.call('INCRBY', KEYS[2], want)
redis.call('EXPIRE', KEYS[2], ARGV[5])
return {want, q}`

// KEYS epoch, counter  ARGV epoch, n, ttl → {new total, 0}
const ADD = `${SAME_EPOCH}
if redis.call('EXISTS', KEYS[2]) == 0 then return {-1, 0} end
local v = redis.call('INCRBY', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {v, 0}`

// KEYS epoch, quota  ARGV epoch, reserved calls to give back (never below zero) → {given back, 0}
const GIVE_BACK = `${SAME_EPOCH}
local q = tonumber(redis.call('GET', KEYS[2]) or '0')
local n = math.min(q, tonumber(ARGV[2]))
if n > 0 then redis.call('DECRBY', KEYS[2], n) end
return {n, 0}`

// KEYS epoch, calls  ARGV epoch → {calls, 0}
const TOTAL = `${SAME_EPOCH}
local v = redis.call('GET', KEYS[2])
if not v then return {-1, 0} end
return {tonumber(v), 0}`

// KEYS epoch, quota, calls  ARGV epoch, persisted total, quota add, calls add, ttl → {quota, calls}.
// Creates missing day keys from the persisted total, then adds what the caller holds.
const JOIN = `${SAME_EPOCH}
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[5]) end
if redis.call('EXISTS', KEYS[3]) == 0 then redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[5]) end
local q = redis.call('INCRBY', KEYS[2], ARGV[3])
local c = redis.call('INCRBY', KEYS[3], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('EXPIRE', KEYS[3], ARGV[5])
return {q, c}`

type Answer = [number, number]
type Scripted = Redis & {
  kwReserve(epochKey: string, quota: string, epoch: string, limit: number, divisor: number, max: number, ttl: number): Promise<Answer>
  kwTotal(epochKey: string, calls: string, epoch: string): Promise<Answer>
  kwJoin(epochKey: string, quota: string, calls: string, epoch: string, persisted: number, quotaAdd: number, callsAdd: number, ttl: number): Promise<Answer>
}
type ScriptedPipeline = ReturnType<Redis['pipeline']> & {
  kwAdd(epochKey: string, key: string, epoch: string, n: number, ttl: number): ScriptedPipeline
  kwGiveBack(epochKey: string, quota: string, epoch: string, n: number): ScriptedPipeline
}

/** One account's UTC day, as the store addresses it, with the epoch its caller's counts belong to. */
export interface DayRef {
  day: string
  account: string
  epoch: string
}

/** Adds and give-backs sent in one round trip; each answer is a number, OTHER_EPOCH or MISSING. */
export class Batch {
  private n = 0
  constructor(private readonly p: ScriptedPipeline) {}

  addCalls(d: DayRef, n: number): number {
    this.p.kwAdd(keys.epoch, keys.calls(d.day, d.account), d.epoch, n, TTL_S)
    return this.n++
  }
  addQuota(d: DayRef, n: number): number {
    this.p.kwAdd(keys.epoch, keys.quota(d.day, d.account), d.epoch, n, TTL_S)
    return this.n++
  }
  giveBack(d: DayRef, n: number): number {
    this.p.kwGiveBack(keys.epoch, keys.quota(d.day, d.account), d.epoch, n)
    return this.n++
  }
  get size() {
    return this.n
  }
  /** The answers by index, or null when the round trip failed (some commands may have applied). */
  async run(): Promise<number[] | null> {
    const results = await this.p.exec().catch(() => null)
    if (!results || results.some(([err]) => err)) return null
    return results.map(([, r]) => Number((r as Answer)[0]))
  }
}

export class QuotaStore {
  private constructor(readonly redis: Scripted) {}

  static connect(url: string, commandTimeoutMs: number): QuotaStore {
    const redis = new Redis(url, {
      enableOfflineQueue: false, // fail at once while disconnected, never queue without bound
      maxRetriesPerRequest: 0,
      commandTimeout: commandTimeoutMs,
      connectTimeout: 1_000,
      retryStrategy: (times) => Math.min(100 * times, 1_000), // reconnect forever
      lazyConnect: false,
    }) as Scripted
    redis.defineCommand('kwReserve', { numberOfKeys: 2, lua: RESERVE })
    redis.defineCommand('kwAdd', { numberOfKeys: 2, lua: ADD })
    redis.defineCommand('kwGiveBack', { numberOfKeys: 2, lua: GIVE_BACK })
    redis.defineCommand('kwTotal', { numberOfKeys: 2, lua: TOTAL })
    redis.defineCommand('kwJoin', { numberOfKeys: 3, lua: JOIN })
    return new QuotaStore(redis)
  }

  ready(): boolean {
    return this.redis.status === 'ready'
  }

  /** This Redis's epoch, created when missing (it started empty or was flushed). */
  async epoch(): Promise<string> {
    await this.redis.set(keys.epoch, crypto.randomUUID(), 'NX')
    const epoch = await this.redis.get(keys.epoch)
    if (!epoch) throw new Error('counter epoch vanished')
    return epoch
  }

  /** Reserves up to 1/`divisor` of what is left under `limit` (at least one, at most `max`). */
  reserve(d: DayRef, limit: number, divisor: number, max: number): Promise<Answer> {
    return this.redis.kwReserve(keys.epoch, keys.quota(d.day, d.account), d.epoch, limit, divisor, max, TTL_S)
  }

  async calls(d: DayRef): Promise<number> {
    return (await this.redis.kwTotal(keys.epoch, keys.calls(d.day, d.account), d.epoch))[0]
  }

  /** Into `epoch`: creates the day's keys from `persisted` if missing, then adds the caller's counts. */
  join(d: DayRef, epoch: string, persisted: number, quotaAdd: number, callsAdd: number): Promise<Answer> {
    return this.redis.kwJoin(keys.epoch, keys.quota(d.day, d.account), keys.calls(d.day, d.account), epoch, persisted, quotaAdd, callsAdd, TTL_S)
  }

  batch(): Batch {
    return new Batch(this.redis.pipeline() as ScriptedPipeline)
  }

  disconnect() {
    this.redis.disconnect()
  }
}

// The node's hot key state: SHA-256 of a key value → what validate needs to decide (status, expiry,
// plan, limit, active devices). A known key and device is answered from here with no I/O.
//
// This file is only the storage; when memory may answer (TTLs, the degraded window while the bus is
// down, collapsed loads, invalidation of loads in flight, answers during a Postgres outage) is the
// shared read-through cache's rule (infra/read-through-cache.ts).
//
// - Compact, so a million keys fit in well under 512 MB: entries are keyed by the digest in base64
//   (44 characters; the bus and Postgres speak hex, converted at those edges, never per request), a
//   single device is held as its string rather than a one-element array, and repeated strings
//   (account, product, plan) are interned.
// - Bounded: at most `maxKeys` known keys, evicted in approximate LRU order (CLOCK: a hit sets a bit,
//   eviction gives a set bit one more round), so a hit costs one property write, not a Map re-insert.
// - Negative entries remember unknown hashes, so guessing costs a guesser one query per value per TTL,
//   not one per request. They live in their own fixed-size table (`maxUnknownKeys`, infra/absent-keys.ts):
//   a flood of random keys churns that table and never evicts a known key.
import { mergeEntitlements, type Entitlements, type OwnEntitlements } from '../../core/entitlements'
import type { PolicyTerms } from './policy-cache'
import type { Bus } from '../../infra/bus'
import { AbsentKeys } from '../../infra/absent-keys'
import { cacheLookupResults } from '../../infra/metrics'
import { FRESH, ReadThroughCache } from '../../infra/read-through-cache'

export type KeyStatus = 'active' | 'revoked' | 'suspended' | 'expired'

/** What Postgres says about one key (see repo.loadKeyState). */
export interface KeyRow {
  accountId: string
  productId: string
  status: KeyStatus
  plan: string | null
  /** epoch ms, null = perpetual */
  expiresAt: number | null
  limit: number
  /** fingerprints (lower-case hex) of the active activations */
  devices: string[]
  /** the effective entitlements (one shared frozen object when none) */
  entitlements: Entitlements
  /** after expiresAt, valid (marked expired) this long */
  graceMs: number
  /** after_expiry keep: valid forever after expiry, marked expired */
  keep: boolean
  /**
   * The key's policy, or null. With one, plan, limit, entitlements, graceMs and keep above are merged
   * from `own` and the policy's terms on use (applyPolicy), so a policy edit needs no key reload.
   */
  policyId: string | null
  own: OwnTerms | null
  /** the policy's one_key_per_device: a new device is decided in Postgres even when the key looks full */
  oneKeyPerDevice: boolean
  /** a metered key (credits not null): a valid answer spends its cost from this node's lease (credit-leases.ts) */
  metered: boolean
}

/** What a key with a policy sets itself: an absent field is inherited. */
export interface OwnTerms {
  plan?: string | null
  limit?: number
  graceMs?: number
  keep?: boolean
  /** the key's own map: a null removes a code the policy gives */
  entitlements: OwnEntitlements
}

export interface KeyState extends Omit<KeyRow, 'devices'> {
  /** Active fingerprints: one device as the string itself (the common case), else an array. */
  devices: string | readonly string[]
  loadedAt: number
  /** CLOCK bit: set on a hit, cleared when eviction passes over the entry */
  used: boolean
  /** The policy terms the effective fields were merged from (compared by identity: a reload is a new object). */
  mergedFrom: PolicyTerms | null
  /**
   * The last valid answer built from this entry (service.ts `valid`), reused while the device count
   * and the expired flag are the same; cleared whenever the effective fields change (applyPolicy).
   */
  answer: object | null
}

/**
 * Merges a key's own settings over its policy's terms into the entry's effective fields, once per
 * loaded policy object (a policy edit drops that object on every node, so the next use merges anew).
 */
export function applyPolicy(state: KeyState, policy: PolicyTerms | null): KeyState {
  if (state.own === null || state.mergedFrom === policy) return state
  const own = state.own
  state.plan = 'plan' in own ? own.plan! : (policy?.plan ?? null)
  state.limit = own.limit ?? policy?.limit ?? 3
  state.graceMs = own.graceMs ?? policy?.graceMs ?? 0
  state.keep = own.keep ?? policy?.keep ?? false
  state.oneKeyPerDevice = policy?.oneKeyPerDevice ?? false
  state.entitlements = Object.keys(own.entitlements).length === 0 && policy ? policy.entitlements : Object.freeze(mergeEntitlements(policy?.entitlements ?? null, own.entitlements))
  state.mergedFrom = policy
  state.answer = null
  return state
}

export interface HotStateOptions {
  ttlMs: number
  degradedTtlMs: number
  /** Known keys held at most. */
  maxKeys: number
  /** Negative entries held at most, apart from the known keys (default DEFAULT_MAX_UNKNOWN_KEYS). */
  maxUnknownKeys?: number
  /** Whether memory may be trusted at `now` (Bus.trusted); always when not given. */
  trusted?: (now: number) => boolean
}

/** 65,536 negative entries: about 6 MB at most. */
export const DEFAULT_MAX_UNKNOWN_KEYS = 65_536

const { hit, negative_hit: negativeHit, miss, stale } = cacheLookupResults

const MAX_INTERNED = 100_000
const NO_DEVICES: readonly string[] = Object.freeze([])

/** The hot-state key for a key_hash (hex, as stored and sent on the bus): the same digest in base64. */
export const hotKeyOf = (keyHash: string) => Buffer.from(keyHash, 'hex').toString('base64')
/** The key_hash (hex) for a hot-state key. */
export const keyHashOf = (hotKey: string) => Buffer.from(hotKey, 'base64').toString('hex')

export function hasDevice(state: KeyState, fingerprint: string): boolean {
  const d = state.devices
  return typeof d === 'string' ? d === fingerprint : d.includes(fingerprint)
}

export function deviceCount(state: KeyState): number {
  const d = state.devices
  return typeof d === 'string' ? 1 : d.length
}

export class HotState extends ReadThroughCache<KeyState> {
  protected known = new Map<string, KeyState>()
  protected unknown: AbsentKeys
  /** Account ids, product ids and plans repeat across keys: keep one copy of each string. */
  private interned = new Map<string, string>()
  private unsubscribe: () => void = () => {}

  constructor(
    private loader: (hotKey: string) => Promise<KeyRow | null>,
    private opts: HotStateOptions,
    bus?: Bus,
  ) {
    super({
      ttlMs: opts.ttlMs,
      degradedTtlMs: opts.degradedTtlMs,
      trusted: opts.trusted,
      lookups: { hit, negativeHit, miss, stale },
    })
    this.unknown = new AbsentKeys(opts.maxUnknownKeys ?? DEFAULT_MAX_UNKNOWN_KEYS)
    if (bus) {
      this.unsubscribe = bus.subscribe((msg) => {
        if (msg.kind === 'key') this.invalidate(hotKeyOf(msg.keyHash))
        else if (msg.kind === 'keys') for (const keyHash of msg.keyHashes) this.invalidate(hotKeyOf(keyHash))
        else if (msg.kind === 'device') this.addDevice(hotKeyOf(msg.keyHash), msg.fingerprint)
        else if (msg.kind === 'resync') this.clear()
        // 'account': nothing here depends on the account's plan (the quota reads the principal's plan).
      })
    }
  }

  /** Known keys held. */
  get size() {
    return this.known.size
  }

  /** Negative entries held. */
  get unknownSize() {
    return this.unknown.size
  }

  /** A fresh known key answers here (the shared rule, no virtual lookup); anything else takes the shared path. */
  override get(hotKey: string, now = Date.now()): KeyState | null | Promise<KeyState | null> {
    const state = this.known.get(hotKey)
    if (state !== undefined && this.freshness.check(state.loadedAt, now) === FRESH) {
      state.used = true
      hit.inc()
      return state
    }
    return super.get(hotKey, now)
  }

  protected read(hotKey: string, startedAt: number): Promise<KeyState | null> {
    return this.loader(hotKey).then((row) => (row === null ? null : this.toState(row, startedAt)))
  }

  protected lookup(hotKey: string): KeyState | undefined {
    const state = this.known.get(hotKey)
    if (state !== undefined) state.used = true
    return state
  }

  protected absentSince(hotKey: string): number | undefined {
    return this.unknown.since(hotKey)
  }

  protected keep(hotKey: string, state: KeyState | null, loadedAt: number) {
    if (state === null) {
      this.known.delete(hotKey)
      this.unknown.set(hotKey, loadedAt)
    } else {
      this.unknown.delete(hotKey)
      this.store(hotKey, state)
    }
  }

  protected drop(hotKey: string) {
    this.known.delete(hotKey)
    this.unknown.delete(hotKey)
  }

  protected dropAll() {
    this.known.clear()
    this.unknown.clear()
  }

  private intern(s: string): string {
    const known = this.interned.get(s)
    if (known !== undefined) return known
    if (this.interned.size < MAX_INTERNED) this.interned.set(s, s)
    return s
  }

  private toState(row: KeyRow, loadedAt: number): KeyState {
    return {
      accountId: this.intern(row.accountId),
      productId: this.intern(row.productId),
      status: row.status,
      plan: row.plan === null ? null : this.intern(row.plan),
      expiresAt: row.expiresAt,
      limit: row.limit,
      devices: row.devices.length === 1 ? row.devices[0] : row.devices.length === 0 ? NO_DEVICES : row.devices,
      entitlements: row.entitlements,
      graceMs: row.graceMs,
      keep: row.keep,
      policyId: row.policyId === null ? null : this.intern(row.policyId),
      own: row.own,
      oneKeyPerDevice: row.oneKeyPerDevice,
      metered: row.metered,
      mergedFrom: null,
      answer: null,
      loadedAt,
      used: false,
    }
  }

  /** Puts a known key (newest position) and evicts past the bound. */
  protected store(hotKey: string, state: KeyState) {
    this.known.delete(hotKey)
    this.known.set(hotKey, state)
    if (this.known.size > this.opts.maxKeys) this.evict()
  }

  /** Fills the state from a row already read (bulk warm-up, benchmarks). */
  put(hotKey: string, row: KeyRow, loadedAt = Date.now()) {
    this.unknown.delete(hotKey)
    this.store(hotKey, this.toState(row, loadedAt))
  }

  private evict() {
    while (this.known.size > this.opts.maxKeys) {
      for (const [hash, state] of this.known) {
        this.known.delete(hash)
        if (state.used) {
          state.used = false
          this.known.set(hash, state) // second chance: to the back of the queue
          continue
        }
        break
      }
    }
  }

  /** A device took a slot (here or on another node): add it without reading the key back. */
  addDevice(hotKey: string, fingerprint: string) {
    const state = this.known.get(hotKey)
    if (state === undefined || hasDevice(state, fingerprint)) return
    const d = state.devices
    state.devices = typeof d === 'string' ? [d, fingerprint] : d.length === 0 ? fingerprint : [...d, fingerprint]
  }

  close() {
    this.unsubscribe()
    this.clear()
  }
}

// The node's hot key state: SHA-256 of a key value → what validate needs to decide (status, expiry,
// plan, limit, active devices). A known key and device is answered from here with no I/O.
//
// This file is only the storage; when memory may answer (TTLs, the degraded window while the bus is
// down, collapsed loads, invalidation of loads in flight, answers during a Postgres outage) is the
// shared read-through cache's rule (infra/read-through-cache.ts).
//
// - Compact: known keys are packed into typed arrays (key-table.ts: the 32-byte digest, fields packed,
//   the first device as 32 bytes, anything rarer out of line), about 140 bytes of RSS per key with one
//   device, so a node holds about 7 million keys per GB (docs/performance.md, "Memory"). Keys are the
//   digest in base64 (44 characters; the bus and Postgres speak hex, converted at those edges).
// - Objects only where used: callers get a KeyState object made from the entry. The one made last is
//   kept while the entry is unchanged (its generation): in the engine's memo of key values (KeyRef, so
//   a repeated key costs no decoding and no probe) and in a small direct-mapped table (VIEWS). Saved
//   answers hang off those objects, so they exist for recently used keys only.
// - Bounded: at most `maxKeys` known keys, evicted in approximate LRU order (CLOCK: a hit sets a bit,
//   eviction gives a set bit one more round), so a hit costs one write into a typed array.
// - Negative entries remember unknown hashes, so guessing costs a guesser one query per value per TTL,
//   not one per request. They live in their own fixed-size table (`maxUnknownKeys`, absent-keys.ts):
//   a flood of random keys churns that table and never evicts a known key.
import { mergeEntitlements } from '../../../core/entitlements'
import { SETTING_DEFAULTS } from '../../../core/key-settings'
import type { PolicyTerms } from '../policy-cache'
import type { Bus } from '../../../infra/bus'
import { AbsentKeys } from './absent-keys'
import { cacheLookupResults } from '../../../infra/metrics'
import { FRESH, ReadThroughCache } from '../../../infra/read-through-cache'
import { KeyTable, type PackedRow } from './key-table'
import type { KeyRow } from './key-row'

export type { KeyRow, KeyStatus, OwnTerms } from './key-row'

export interface KeyState extends Omit<KeyRow, 'devices'> {
  /** Active fingerprints: one device as the string itself (the common case), else an array. */
  devices: string | readonly string[]
  loadedAt: number
  /** The policy terms the effective fields were merged from (compared by identity: a reload is a new object). */
  mergedFrom: PolicyTerms | null
  /**
   * The last valid answer built from this entry (service.ts `valid`), reused while the device count
   * and the expired flag are the same; cleared whenever the effective fields change (applyPolicy).
   */
  answer: object | null
  /** The table entry this object was made from (-1: never stored), and that entry's generation then. */
  slot: number
  gen: number
}

/**
 * A key value's place in the hot state as the engine remembers it between calls (in its memo of key
 * values): the digest, and the object last answered for it, which answers again while its entry is
 * unchanged (same generation) and fresh, with no digest decoded and no index probed.
 */
export interface KeyRef {
  readonly hotKey: string
  view: KeyState | null
}

/**
 * Merges a key's own settings over its policy's terms into the entry's effective fields, once per
 * loaded policy object (a policy edit drops that object on every node, so the next use merges anew).
 */
export function applyPolicy(state: KeyState, policy: PolicyTerms | null): KeyState {
  if (state.own === null || state.mergedFrom === policy) return state
  const own = state.own
  // the rule of core/key-settings.ts (`effective`) in the hot state's units; its defaults
  state.plan = 'plan' in own ? own.plan! : (policy?.plan ?? SETTING_DEFAULTS.plan)
  state.limit = own.limit ?? policy?.limit ?? SETTING_DEFAULTS.activation_limit
  state.graceMs = own.graceMs ?? policy?.graceMs ?? SETTING_DEFAULTS.grace_seconds * 1000
  state.keep = own.keep ?? policy?.keep ?? SETTING_DEFAULTS.after_expiry === 'keep'
  state.oneKeyPerDevice = policy?.oneKeyPerDevice ?? SETTING_DEFAULTS.one_key_per_device
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

/**
 * Objects made from entries, kept for reuse by callers that come with a digest string (the engine
 * keeps its own through KeyRef): a direct-mapped table, so the objects (and saved answers) held
 * besides the engine's memo are at most this many, however many keys the table holds.
 */
const VIEWS = 4096

/** The hot-state key for a key_hash (hex, as stored and sent on the bus): the same digest in base64. */
export const hotKeyOf = (keyHash: string) => Buffer.from(keyHash, 'hex').toString('base64')
/** The key_hash (hex) for a hot-state key. */
export const keyHashOf = (hotKey: string) => Buffer.from(hotKey, 'base64').toString('hex')

export function hasDevice(state: KeyState, fingerprint: string): boolean {
  const d = state.devices
  return typeof d === 'string' ? d === fingerprint : d.includes(fingerprint)
}

/** The seats taken: the active devices, plus the seats of the key's relays (docs/api.md, "Relays"). */
export function deviceCount(state: KeyState): number {
  const d = state.devices
  return (typeof d === 'string' ? 1 : d.length) + state.relaySeats
}

export class HotState extends ReadThroughCache<KeyState> {
  protected table: KeyTable
  protected unknown: AbsentKeys
  private views: (KeyState | undefined)[] = new Array<KeyState | undefined>(VIEWS).fill(undefined)
  private unsubscribe: () => void = () => {}

  constructor(
    private loader: (hotKey: string) => Promise<KeyRow | null>,
    opts: HotStateOptions,
    bus?: Bus,
  ) {
    super({
      ttlMs: opts.ttlMs,
      degradedTtlMs: opts.degradedTtlMs,
      trusted: opts.trusted,
      lookups: { hit, negativeHit, miss, stale },
    })
    this.table = new KeyTable(opts.maxKeys)
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
    return this.table.size
  }

  /** Negative entries held. */
  get unknownSize() {
    return this.unknown.size
  }

  /**
   * The engine's lookup: the object it holds for this key value answers again while its entry is
   * unchanged and fresh (the shared rule); anything else takes `get` and remembers what it answered.
   */
  getRef(ref: KeyRef, now: number): KeyState | null | Promise<KeyState | null> {
    const view = ref.view
    if (view !== null && this.table.current(view.slot, view.gen) && this.freshness.check(view.loadedAt, now) === FRESH) {
      this.table.markUsed(view.slot)
      hit.inc()
      return view
    }
    const state = this.get(ref.hotKey, now)
    ref.view = state === null || state instanceof Promise ? null : state
    return state
  }

  /** A fresh known key answers here (the shared rule, no virtual lookup); anything else takes the shared path. */
  override get(hotKey: string, now = Date.now()): KeyState | null | Promise<KeyState | null> {
    const e = this.table.find(hotKey)
    if (e >= 0 && this.freshness.check(this.table.loadedAt[e], now) === FRESH) {
      this.table.markUsed(e)
      hit.inc()
      return this.viewOf(e)
    }
    return super.get(hotKey, now)
  }

  /** The object for entry `e`: the one made last while the entry is unchanged, else a new one. */
  private viewOf(e: number): KeyState {
    const i = e & (VIEWS - 1)
    const held = this.views[i]
    if (held !== undefined && held.slot === e && this.table.current(e, held.gen)) return held
    const view = this.toState(this.table.row(e), this.table.loadedAt[e])
    view.slot = e
    view.gen = this.table.gen[e]
    this.views[i] = view
    return view
  }

  protected read(hotKey: string, startedAt: number): Promise<KeyState | null> {
    return this.loader(hotKey).then((row) => (row === null ? null : this.toState(row, startedAt)))
  }

  protected lookup(hotKey: string): KeyState | undefined {
    const e = this.table.find(hotKey)
    if (e < 0) return undefined
    this.table.markUsed(e)
    return this.viewOf(e)
  }

  protected absentSince(hotKey: string): number | undefined {
    return this.unknown.since(hotKey)
  }

  protected keep(hotKey: string, state: KeyState | null, loadedAt: number) {
    if (state === null) {
      this.table.delete(hotKey)
      this.unknown.set(hotKey, loadedAt)
    } else {
      this.unknown.delete(hotKey)
      this.store(hotKey, state, loadedAt)
    }
  }

  protected drop(hotKey: string) {
    this.table.delete(hotKey)
    this.unknown.delete(hotKey)
  }

  protected dropAll() {
    this.table.clear()
    this.unknown.clear()
    this.views.fill(undefined)
  }

  private toState(row: KeyRow | PackedRow, loadedAt: number): KeyState {
    const d = row.devices
    return {
      accountId: row.accountId,
      productId: row.productId,
      status: row.status,
      plan: row.plan,
      expiresAt: row.expiresAt,
      limit: row.limit,
      devices: typeof d === 'string' || d.length !== 1 ? d : d[0],
      entitlements: row.entitlements,
      graceMs: row.graceMs,
      keep: row.keep,
      policyId: row.policyId,
      own: row.own,
      oneKeyPerDevice: row.oneKeyPerDevice,
      metered: row.metered,
      relaySeats: row.relaySeats,
      mergedFrom: null,
      answer: null,
      loadedAt,
      slot: -1,
      gen: 0,
    }
  }

  /** Puts a known key (evicting past the bound); the object read becomes the entry's object. */
  protected store(hotKey: string, state: KeyState, loadedAt: number) {
    const e = this.table.set(hotKey, state, loadedAt)
    if (e < 0) return
    state.slot = e
    state.gen = this.table.gen[e]
    this.views[e & (VIEWS - 1)] = state
  }

  /** Fills the state from a row already read (bulk warm-up, benchmarks). */
  put(hotKey: string, row: KeyRow, loadedAt = Date.now()) {
    this.unknown.delete(hotKey)
    this.table.set(hotKey, row, loadedAt)
  }

  /** A device took a slot (here or on another node): add it without reading the key back. */
  addDevice(hotKey: string, fingerprint: string) {
    const e = this.table.find(hotKey)
    if (e >= 0) this.table.addDevice(e, fingerprint) // a change: objects made before it are out of date
  }

  close() {
    this.unsubscribe()
    this.clear()
  }
}

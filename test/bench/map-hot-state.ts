// The hot state's previous layout (until issue #26 item 3), kept as the reference the memory benchmark
// measures the packed layout against in the same run (validate-roles.ts, role `memory` with
// BENCH_LAYOUT=map): a Map from the digest in base64 to one object per key, a single device as its
// hex string, repeated strings interned. The same rules (it extends the same read-through cache); only
// the storage differs. Not used by the node.
import type { Bus } from '../../src/infra/bus'
import { AbsentKeys } from '../../src/modules/validation/hot/absent-keys'
import { cacheLookupResults } from '../../src/infra/metrics'
import { FRESH, ReadThroughCache } from '../../src/infra/read-through-cache'
import {
  DEFAULT_MAX_UNKNOWN_KEYS,
  hasDevice,
  hotKeyOf,
  type HotStateOptions,
  type KeyRef,
  type KeyRow,
  type KeyState,
} from '../../src/modules/validation/hot/hot-state'

type Entry = KeyState & { used: boolean }

const { hit, negative_hit: negativeHit, miss, stale } = cacheLookupResults
const MAX_INTERNED = 100_000
const NO_DEVICES: readonly string[] = Object.freeze([])

export class MapHotState extends ReadThroughCache<KeyState> {
  protected known = new Map<string, Entry>()
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

  /** The engine's lookup (hot-state.ts): here simply `get`, as the engine called it before. */
  getRef(ref: KeyRef, now: number) {
    return this.get(ref.hotKey, now)
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
      this.store(hotKey, state as Entry)
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

  private toState(row: KeyRow, loadedAt: number): Entry {
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
      relaySeats: row.relaySeats,
      mergedFrom: null,
      answer: null,
      loadedAt,
      used: false,
      slot: -1,
      gen: 0,
    }
  }

  /** Puts a known key (newest position) and evicts past the bound. */
  protected store(hotKey: string, state: Entry) {
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

// What POST /hooks/:connector_id may cost before its signature is checked (docs/decisions.md, "Payment
// connectors"): the door has no Authorization, so anyone can call it as often as they like. On each
// node, before Postgres:
// - a token bucket per calling address and one per connector id (known or not, so a 429 says nothing
//   about which ids exist);
// - the connector ids that exist, in memory: an unknown id is answered without Postgres. This node's
//   creates and deletes update it at once; another node's are seen at the next reload, which a miss
//   triggers at most once per RELOAD_MS (so a flood of made-up ids costs one small read per interval);
// - bad signatures are counted (keyward_hook_refusals_total) and at most one per connector per
//   RECORD_EVERY_MS is written to the connector's events, for the console.
import type { Sql } from '../../infra/db'
import { hookRefusals } from '../../infra/metrics'
import { TokenBuckets } from '../../infra/token-buckets'
import { AppError } from '../../core/errors'

/** Calls per second (and at once) from one address, over every connector. */
export const HOOK_ADDRESS_RATE = { perSecond: 50, burst: 200 }
/** Calls per second (and at once) to one connector id, from every address. */
export const HOOK_CONNECTOR_RATE = { perSecond: 20, burst: 100 }
/** A miss reloads the known ids at most this often: a connector created on another node is known here within it. */
export const RELOAD_MS = 5_000
/** At most one bad signature per connector is written per this interval (per node); every one is counted. */
export const RECORD_EVERY_MS = 60_000

export class HookGate {
  private byAddress = new TokenBuckets(HOOK_ADDRESS_RATE.perSecond, HOOK_ADDRESS_RATE.burst)
  private byConnector = new TokenBuckets(HOOK_CONNECTOR_RATE.perSecond, HOOK_CONNECTOR_RATE.burst)
  private ids = new Set<string>()
  private loadedAt = -Infinity
  private loading: Promise<void> | null = null
  private recorded = new Map<string, number>()

  constructor(private readonly sql: Sql) {}

  /**
   * 429 past the address's or the connector id's rate; nothing else is spent on the call then. Ids that
   * are not even shaped like one (`wellFormed` false) share one bucket: no memory per made-up string.
   */
  admit(connectorId: string, wellFormed: boolean, address: string | null, now: number): void {
    const wait = Math.max(address === null ? 0 : this.byAddress.take(address, now), this.byConnector.take(wellFormed ? connectorId : '', now))
    if (wait === 0) return
    hookRefusals.labels('rate_limited').inc()
    throw new AppError('rate_limited', 'Too many calls to this endpoint; retry shortly', { retryAfter: Math.max(1, Math.ceil(wait / 1000)) })
  }

  /** Whether `id` is a connector (on this node's last reading); a miss reloads at most once per RELOAD_MS. */
  async known(id: string, now: number): Promise<boolean> {
    if (this.ids.has(id)) return true
    if (now - this.loadedAt >= RELOAD_MS) {
      this.loading ??= this.reload(now).finally(() => (this.loading = null))
      await this.loading
    }
    return this.ids.has(id)
  }

  private async reload(now: number): Promise<void> {
    const rows = await this.sql<{ id: string }[]>`select id from connectors`
    this.ids = new Set(rows.map((r) => r.id))
    this.loadedAt = now
  }

  /** This node created a connector: known at once. */
  created(id: string): void {
    this.ids.add(id)
  }

  /** A connector is gone (deleted here, or looked up and not found). */
  forget(id: string): void {
    this.ids.delete(id)
    this.recorded.delete(id)
  }

  /** A bad signature on `connectorId`: counted; true when it is the one to write (the first per RECORD_EVERY_MS). */
  badSignature(connectorId: string, now: number): boolean {
    hookRefusals.labels('bad_signature').inc()
    const last = this.recorded.get(connectorId)
    if (last !== undefined && now - last < RECORD_EVERY_MS) return false
    this.recorded.set(connectorId, now)
    return true
  }

  unknown(): void {
    hookRefusals.labels('unknown_connector').inc()
  }
}

/** One gate per node (per set of dependencies: tests run several nodes in one process). */
const gates = new WeakMap<object, HookGate>()
export function hookGateOf(deps: { sql: Sql }): HookGate {
  let gate = gates.get(deps)
  if (gate === undefined) gates.set(deps, (gate = new HookGate(deps.sql)))
  return gate
}

// The `Bus` carries invalidations between nodes. `publish` resolves once every live node has applied
// the message (or a bounded wait ran out), so a write can return only after stale copies are gone.
// Embedded mode: one process, delivered synchronously in-process. Cluster mode: NATS (see nats-bus.ts).

export type BusMessage =
  /** A license key changed (revoke, extend, activation change, creation): drop its hot state. */
  | { kind: 'key'; accountId: string; keyHash: string }
  /** Many license keys changed at once (inactivity release, product deletion): one message, one wait. */
  | { kind: 'keys'; keyHashes: string[] }
  /**
   * A policy changed: every node drops its copy of the policy (one row), so every key that inherits
   * from it answers the new settings, whatever their number, with no message or query per key.
   */
  | { kind: 'policy'; policyId: string }
  /** An API key was revoked or rotated away: drop the cached principal for this token hash. */
  | { kind: 'api_key'; tokenHash: string }
  /** An account's signing keys changed (activate, revoke, create): drop its signers (modules/signing/signers.ts). */
  | { kind: 'signers'; accountId: string }
  /** Account-wide change (plan): drop everything cached for the account. */
  | { kind: 'account'; accountId: string }
  /** A new device took a slot: other nodes add it to their hot state without reading it back. */
  | { kind: 'device'; accountId: string; keyHash: string; fingerprint: string; activationId: string }
  /**
   * Delivered locally by a bus that was disconnected and is back: messages may have been missed, so
   * every cache drops what it holds (or re-checks it against Postgres) before trusting memory again.
   */
  | { kind: 'resync' }

/** Most key hashes one `keys` message carries: ≈70 KB of JSON, far below NATS's 1 MB default payload. */
export const KEYS_PER_MESSAGE = 1_000

export type BusState = 'ok' | 'down' | 'embedded'

export interface Bus {
  publish(msg: BusMessage): Promise<void>
  subscribe(handler: (msg: BusMessage) => void): () => void
  state(): BusState
  /**
   * Whether this node may answer from memory at `now` (Date.now()) with its full TTL: false when it
   * may have missed an invalidation (it then only trusts entries loaded within DEGRADED_TTL_MS,
   * which every writer waits out). Called on every validate: must stay a field comparison.
   */
  trusted(now: number): boolean
  /**
   * Asks every node to run its barrier handlers (e.g. write what it batches in memory) and waits:
   * true once every live member and this node have done so, false when one could not be asked or
   * did not confirm within `timeoutMs` (NATS down, a partitioned or an older node). This node's own
   * handlers always run; their failure rejects.
   */
  barrier(timeoutMs?: number): Promise<boolean>
  /** A handler run for every barrier (this node's and the others'). */
  onBarrier(handler: () => Promise<void>): () => void
  close(): Promise<void>
}

/** How long a barrier waits for the other nodes' confirmations by default. */
export const BARRIER_TIMEOUT_MS = 1_000

/** Runs every barrier handler at once; rejects if one fails. */
export async function runBarrierHandlers(handlers: Iterable<() => Promise<void>>): Promise<void> {
  await Promise.all([...handlers].map((h) => h()))
}

export class LocalBus implements Bus {
  private handlers = new Set<(msg: BusMessage) => void>()
  private barriers = new Set<() => Promise<void>>()

  async publish(msg: BusMessage): Promise<void> {
    for (const h of this.handlers) h(msg)
  }

  subscribe(handler: (msg: BusMessage) => void): () => void {
    this.handlers.add(handler)
    return () => this.handlers.delete(handler)
  }

  state(): BusState {
    return 'embedded'
  }

  trusted(_now: number): boolean {
    return true // one process: every invalidation is applied before the write returns
  }

  async barrier(): Promise<boolean> {
    await runBarrierHandlers(this.barriers)
    return true // the only node
  }

  onBarrier(handler: () => Promise<void>): () => void {
    this.barriers.add(handler)
    return () => this.barriers.delete(handler)
  }

  async close(): Promise<void> {
    this.handlers.clear()
    this.barriers.clear()
  }
}

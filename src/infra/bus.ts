// The `Bus` carries invalidations between nodes. `publish` resolves once every live node has applied
// the message (or a bounded wait ran out), so a write can return only after stale copies are gone.
// Embedded mode: one process, delivered synchronously in-process. Cluster mode: NATS (see nats-bus.ts).

export type BusMessage =
  /** A license key changed (revoke, extend, activation change, creation): drop its hot state. */
  | { kind: 'key'; accountId: string; keyHash: string }
  /** An API key was revoked or rotated away: drop the cached principal for this token hash. */
  | { kind: 'api_key'; tokenHash: string }
  /** Account-wide change (plan): drop everything cached for the account. */
  | { kind: 'account'; accountId: string }
  /** A new device took a slot: other nodes add it to their hot state without reading it back. */
  | { kind: 'device'; accountId: string; keyHash: string; fingerprint: string; activationId: string }
  /**
   * Delivered locally by a bus that was disconnected and is back: messages may have been missed, so
   * every cache drops what it holds (or re-checks it against Postgres) before trusting memory again.
   */
  | { kind: 'resync' }

export type BusState = 'ok' | 'down' | 'embedded'

export interface Bus {
  publish(msg: BusMessage): Promise<void>
  subscribe(handler: (msg: BusMessage) => void): () => void
  state(): BusState
  close(): Promise<void>
}

export class LocalBus implements Bus {
  private handlers = new Set<(msg: BusMessage) => void>()

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

  async close(): Promise<void> {
    this.handlers.clear()
  }
}

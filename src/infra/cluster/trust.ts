// Change numbering and the trust window (docs/operations.md, "How the nodes stay one service"): every
// change that alters an answer takes a number from the Postgres sequence `cluster_changes`; this node
// tracks which numbers it has received, and trusts its memory only under a trust window it renews from
// Postgres a few times a second. A renewal counts once every number up to the sequence value read
// after it began is in, and lasts `trustWindowMs` from its start on this node's monotonic clock.
import type { Sql } from '../db'
import { beat } from '../cluster-nodes'
import { withTimeout } from './transport'

/** A renewal read the sequence at `v`, having started at `s` (monotonic): it counts once all of `v` is in. */
type Renewal = { v: number; s: number }

export interface TrustOptions {
  sql: Sql
  nodeId: string
  trustWindowMs: number
  /** While NATS is up, how long a missing numbered change may take to arrive before the node resyncs. */
  ackTimeoutMs: number
  /** Whether NATS is up (a missing change while it is down means a resync at once). */
  busUp: () => boolean
  /** Whether this node can send key emails, published in its membership row (cluster-nodes.ts `beat`). */
  canMail?: boolean
  /** Drops every cache; calls `skipTo(upTo)` before and `settle()` after the drop. */
  resync: (cause: string, upTo: number | null) => void
}

export class TrustWindow {
  // Every number <= watermark is accounted for (received, or dropped by a resync).
  private watermark = 0
  private seen = new Set<number>()
  private gap: { upTo: number; since: number } | null = null
  // Until `windowEnd` (performance.now()), mirrored as wall-clock `trustUntil` for callers.
  private windowEnd = 0
  private trustUntil = 0
  private pending: Renewal[] = []
  private renewing = false
  private renewAgain = false
  private stopped = false

  constructor(private readonly opts: TrustOptions) {}

  /** Reads where the sequence stands and renews once: from then on every writer waits for this node. */
  async start(): Promise<void> {
    this.watermark = await this.sequenceValue()
    await this.renew()
  }

  async sequenceValue(): Promise<number> {
    const [row] = await this.opts.sql<{ v: string; called: boolean }[]>`select last_value::text as v, is_called as called from cluster_changes`
    return row && row.called ? Number(row.v) : 0
  }

  /**
   * One renewal: report what this node has seen, read the change sequence, and extend the trust window when
   * everything up to it is in (now, or later when the missing messages arrive). A change that stays
   * missing (longer than a writer waits for acks, or at once when NATS is down) means a resync.
   */
  async renew(): Promise<void> {
    if (this.stopped) return
    if (this.renewing) return void (this.renewAgain = true)
    this.renewing = true
    try {
      const s = performance.now()
      const before = this.watermark // every number up to it was handed out before this renewal began
      const upTo = await withTimeout(beat(this.opts.sql, this.opts.nodeId, before, this.opts.canMail), this.opts.trustWindowMs)
      this.prune()
      this.pending.push({ v: upTo, s })
      if (this.pending.length > 16) this.pending.shift()
      if (upTo < before) {
        // The sequence is behind what this node had received: Postgres crashed before flushing numbers it
        // had handed out (cluster-nodes.ts `announce`), and may hand them out again. Numbers this node
        // counts as in could then be changes it never got: drop memory and count from the sequence.
        this.rewind(upTo)
        this.opts.resync('sequence_rewound', upTo)
      }
      this.settle()
      const now = Date.now()
      if (this.watermark >= upTo) this.gap = null
      else {
        if (!this.gap || this.watermark >= this.gap.upTo) this.gap = { upTo, since: now }
        if (!this.opts.busUp() || now - this.gap.since >= this.opts.ackTimeoutMs) {
          this.opts.resync('missed_change', upTo)
          this.grant(s) // everything up to `upTo` is dropped; later changes are waited out by their writers
          this.renewAgain = true // tell waiting writers at once
        }
      }
    } catch {
      // Postgres unreachable or slow: no renewal, the trust window runs out on its own
    } finally {
      this.renewing = false
    }
    if (this.renewAgain && !this.stopped) {
      this.renewAgain = false
      void this.renew()
    }
  }

  /** A numbered change is in (received, or this node's own). */
  received(seq: number) {
    this.seen.add(seq)
    this.prune()
    this.settle()
  }

  /** Everything up to `upTo` is being dropped by a resync (null: the sequence could not be read). */
  skipTo(upTo: number | null) {
    if (upTo !== null) this.watermark = Math.max(this.watermark, upTo)
    this.gap = null
    this.prune()
  }

  /** The sequence went back to `upTo`: forget every number above it (they may be handed out again). */
  private rewind(upTo: number) {
    this.watermark = upTo
    this.seen.clear()
    this.gap = null
    for (const r of this.pending) if (r.v > upTo) r.v = upTo
  }

  /** Grants the trust window for every renewal whose sequence value is now covered. */
  settle() {
    let s = -1
    while (this.pending.length > 0 && this.pending[0]!.v <= this.watermark) s = this.pending.shift()!.s
    if (s >= 0) this.grant(s)
  }

  private grant(since: number) {
    const end = since + this.opts.trustWindowMs
    if (end <= this.windowEnd) return
    this.windowEnd = end
    this.anchor()
  }

  /** Re-anchors the wall-clock view of the trust window on the monotonic clock (a stepped wall clock). */
  anchor() {
    this.trustUntil = Date.now() + (this.windowEnd - performance.now())
  }

  /** Whether memory can be trusted at `now` (Date.now()): one comparison, called per request. */
  trusted(now: number): boolean {
    return now < this.trustUntil
  }

  private prune() {
    while (this.seen.has(this.watermark + 1)) this.seen.delete(++this.watermark)
    if (this.seen.size > 0) for (const n of this.seen) if (n <= this.watermark) this.seen.delete(n)
  }

  /** Stops renewing and trusting at once (the node is stopping). */
  stop() {
    this.stopped = true
    this.windowEnd = 0
    this.trustUntil = 0
  }
}

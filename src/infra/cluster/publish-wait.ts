// Publish-and-wait: a write that changes an answer returns only when every member has dropped its copy
// or has provably stopped trusting its memory (docs/operations.md, "How the nodes stay one service").
// The writer sends the change at once (the early copy), numbers it (and learns the members) in Postgres
// meanwhile, sends it again with its number, then waits for each member's ack on NATS, or for its row to
// report the change as seen; for a member it hears neither from, it waits `trustWindowMs` (+ a margin)
// from after taking the number: any renewal that did not include the change began before that, so it
// has run out. (The early copy changes no trust window: only the numbered one counts toward trust.)
import type { Sql } from '../db'
import type { Logger } from '../log'
import { announce, notYetSeen } from '../cluster-nodes'
import { busPublishWait, invalidations } from '../metrics'
import { withTimeout, type Reply } from './transport'

/** Covers clock rate differences between the writer and the nodes it waits out (and timer lateness). */
const MARGIN_MS = 100
/** How long a writer tries to number its change (Postgres was up a moment ago, for its commit). */
const ANNOUNCE_MS = 2000
/** How often a waiting writer reads the rows of members it has no ack from. */
const SEEN_POLL_MS = 100

const ackTimeout = invalidations.labels('ack_timeout')
const acked = invalidations.labels('acked')

/** A write waiting for acks. Until its number is taken the members are not known: acks are collected. */
type Waiter = { missing: Set<string> | null; early: Set<string>; done: () => void }

export interface PublishWaitOptions {
  sql: Sql
  log: Logger
  nodeId: string
  trustWindowMs: number
}

/** What a numbered publish does besides waiting: apply locally, send, note its own number. */
export interface Publishing {
  kind: string
  /** Applies the message on this node. */
  deliver(): void
  /**
   * Sends it under `id`, if the bus is up: first with `seq` null (the early copy, sent while the number
   * is being taken), then with its number; a member applies it once and acks each copy.
   */
  send(id: string, seq: number | null): void
  /** This node's own change is in. */
  received(seq: number): void
}

export class PublishWaits {
  private waiters = new Map<string, Waiter>()
  private nextId = 0
  private closed = false

  constructor(private readonly opts: PublishWaitOptions) {}

  newId(tag = ''): string {
    return `${this.opts.nodeId}.${tag}${++this.nextId}`
  }

  async publish(p: Publishing): Promise<void> {
    const { sql, log, trustWindowMs } = this.opts
    const stopTimer = busPublishWait.startTimer()
    // The early copy: the commit is in, so the members may drop their copies now, while the number is
    // taken. Their acks are kept until the number's statement says who the members are. (Before, the
    // copy went out after that statement: its Postgres round trip and the NATS round trip were added,
    // now the slower of the two decides; docs/performance.md, "Cluster".)
    const id = this.newId()
    let settle: () => void = () => {}
    const settled = new Promise<void>((done) => (settle = done))
    const waiter: Waiter = { missing: null, early: new Set(), done: settle }
    this.waiters.set(id, waiter)
    p.deliver()
    p.send(id, null)
    try {
      // The writer committed just before this, so Postgres is up; bounded anyway. Members: every node
      // that renewed lately (a node that stopped renewing earlier has stopped trusting its memory).
      const windowMs = 2 * trustWindowMs + 1000
      // Retried while a quick failure leaves time (a connection dropped between commit and here), 2 s in all.
      let ann: { seq: number; members: string[] } | null = null
      for (const until = performance.now() + ANNOUNCE_MS; !ann && performance.now() < until; ) {
        ann = await withTimeout(announce(sql, this.opts.nodeId, windowMs), until - performance.now()).catch(() => null)
        if (!ann) await new Promise((r) => setTimeout(r, 50))
      }
      const numberedAt = performance.now()
      if (!ann) {
        // No number: the others cannot notice a missed message, and we do not know who to wait for.
        // The early copy went out; wait out every trust window (those that renew meanwhile are not covered: logged).
        log.error({ kind: p.kind }, 'invalidation could not be numbered (Postgres unreachable after the commit)')
        await new Promise((r) => setTimeout(r, trustWindowMs + MARGIN_MS))
        return
      }
      const seq = ann.seq
      p.received(seq)
      // The numbered copy counts toward every node's trust window (trust.ts); a member that missed the early
      // copy applies this one.
      p.send(id, seq)
      const missing = new Set(ann.members)
      for (const node of waiter.early) missing.delete(node)
      waiter.missing = missing
      // Acks, rows that report the change as seen, or the members' trust windows running out: whichever is first.
      const deadline = numberedAt + trustWindowMs + MARGIN_MS
      for (;;) {
        const left = deadline - performance.now()
        if (missing.size === 0 || left <= 0 || this.closed) break
        let timer: ReturnType<typeof setTimeout> | undefined
        await Promise.race([settled, new Promise<void>((r) => (timer = setTimeout(r, Math.min(SEEN_POLL_MS, left))))])
        clearTimeout(timer)
        if (missing.size === 0) continue
        const still = await withTimeout(notYetSeen(sql, [...missing], seq), Math.max(1, deadline - performance.now())).catch(() => null)
        if (still) for (const node of missing) if (!still.has(node)) missing.delete(node)
      }
      if (missing.size > 0) {
        ackTimeout.inc(missing.size)
        log.warn({ kind: p.kind, missing: [...missing] }, 'invalidation waited out: no ack from every member, their trust in memory has run out')
      }
    } finally {
      this.waiters.delete(id)
      stopTimer()
    }
  }

  onAck(ack: Reply) {
    acked.inc()
    const w = this.waiters.get(ack.id)
    if (!w) return
    if (w.missing === null) w.early.add(ack.from)
    else if (w.missing.delete(ack.from) && w.missing.size === 0) this.settle(ack.id)
  }

  /** A member said goodbye: no write waits for it any longer. */
  forget(node: string) {
    for (const [id, w] of this.waiters) {
      if (w.missing === null) w.early.add(node)
      else if (w.missing.delete(node) && w.missing.size === 0) this.settle(id)
    }
  }

  private settle(id: string) {
    const w = this.waiters.get(id)
    this.waiters.delete(id)
    w?.done()
  }

  /** Releases every waiting write (the node is stopping). */
  close() {
    this.closed = true
    for (const id of [...this.waiters.keys()]) this.settle(id)
  }
}

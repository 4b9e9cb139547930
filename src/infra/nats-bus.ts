// The cluster `Bus`: NATS core pub/sub carries the messages, Postgres holds membership (cluster-nodes.ts)
// and the change numbers. How it keeps the fault rule (a write returns only when every node that may
// still answer from memory has dropped its copy or has provably stopped trusting its memory) is told in
// docs/operations.md, "How the nodes stay one service". One file per idea, in cluster/:
//   transport.ts     the NATS connection and subjects
//   trust.ts         change numbering seen by this node, and its trust window
//   publish-wait.ts  a numbered write waits for every member (ack, seen row, or its trust window ended)
//   barrier.ts       every member runs its barrier handlers
// This file wires them and recovers from missed messages: on reconnect, and when the change sequence
// is ahead of what arrived, every cache drops what it holds (a local `resync`).
import { hostname } from 'node:os'
import type { Bus, BusMessage, BusState } from './bus'
import { Barriers } from './cluster/barrier'
import { PublishWaits } from './cluster/publish-wait'
import { NatsTransport, withTimeout, type Envelope } from './cluster/transport'
import { TrustWindow } from './cluster/trust'
import type { Sql } from './db'
import type { Logger } from './log'
import { leave } from './cluster-nodes'
import { busConnected, busResyncs, invalidations } from './metrics'

export interface NatsBusOptions {
  url: string
  sql: Sql
  log: Logger
  /** While NATS is up, how long a missing numbered change may take to arrive before the node resyncs. */
  ackTimeoutMs?: number
  /** How often the node renews its trust window (and compares the change sequence with what it received). */
  seqPollMs?: number
  /** How long a renewal lets the node trust its memory (DEGRADED_TTL_MS); also the most a write waits. */
  trustWindowMs?: number
  /** How long startup waits for a first connection before serving in state 'down'. */
  connectWaitMs?: number
  /** This node can send key emails (SMTP_URL and MAIL_FROM set): said in its membership row. */
  canMail?: boolean
}

const sent = invalidations.labels('sent')
const received = invalidations.labels('received')

/** Messages that change an answer are numbered; device broadcasts only save a read and need no ack. */
const numbered = (m: BusMessage) => m.kind === 'key' || m.kind === 'keys' || m.kind === 'api_key' || m.kind === 'account' || m.kind === 'policy' || m.kind === 'signers'

export class NatsBus implements Bus {
  readonly nodeId = `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  private handlers = new Set<(msg: BusMessage) => void>()
  private current: BusState = 'down'
  private closed = false
  private timers: ReturnType<typeof setInterval>[] = []
  private readonly trustWindowMs: number
  private transport!: NatsTransport
  private trust: TrustWindow
  private waits: PublishWaits
  private barriers!: Barriers
  /** Ids of the changes applied lately, so the numbered copy of one is not applied again. */
  private applied = new RecentIds(4096)

  private constructor(private opts: NatsBusOptions) {
    this.trustWindowMs = opts.trustWindowMs ?? 2000
    busConnected.set(0)
    this.trust = new TrustWindow({
      sql: opts.sql,
      nodeId: this.nodeId,
      trustWindowMs: this.trustWindowMs,
      ackTimeoutMs: opts.ackTimeoutMs ?? 1000,
      busUp: () => this.current === 'ok',
      canMail: opts.canMail,
      resync: (cause, upTo) => this.resync(cause, upTo),
    })
    this.waits = new PublishWaits({ sql: opts.sql, log: opts.log, nodeId: this.nodeId, trustWindowMs: this.trustWindowMs })
  }

  /** Connects (waiting up to `connectWaitMs`; after that it keeps trying in the background). */
  static async start(opts: NatsBusOptions): Promise<NatsBus> {
    const bus = new NatsBus(opts)
    const [row] = await opts.sql<{ id: string }[]>`select id from cluster_identity limit 1`
    const prefix = `keyward.${row?.id ?? 'default'}`
    bus.transport = new NatsTransport(prefix, bus.nodeId, opts.log, {
      invalidation: (env) => bus.onInvalidation(env),
      ack: (ack) => bus.waits.onAck(ack),
      bye: (node) => bus.waits.forget(node),
      barrierRequest: (req) => bus.barriers.onRequest(req),
      barrierDone: (done) => bus.barriers.onDone(done),
      down: () => bus.setState('down'),
      back: (cause) => bus.catchUp(cause),
    })
    bus.barriers = new Barriers({
      sql: opts.sql,
      log: opts.log,
      nodeId: bus.nodeId,
      trustWindowMs: bus.trustWindowMs,
      busUp: () => bus.current === 'ok' && bus.transport.open(),
      send: (subject, body) => bus.transport.send(subject, body),
      newId: () => bus.waits.newId('b'),
    })
    // Registered before anything is cached here: from now on every writer waits for this node.
    await bus.trust.start()
    await withTimeout(bus.transport.connect(opts.url), opts.connectWaitMs ?? 5000).catch(() =>
      opts.log.warn({ url: opts.url }, 'NATS unreachable at startup; serving in degraded mode until it connects'),
    )
    const pollMs = Math.max(20, Math.min(opts.seqPollMs ?? 500, Math.floor(bus.trustWindowMs / 4)))
    bus.timers.push(setInterval(() => void bus.trust.renew(), pollMs))
    bus.timers.push(setInterval(() => bus.trust.anchor(), 100))
    for (const t of bus.timers) (t as { unref?: () => void }).unref?.()
    return bus
  }

  /**
   * Back on the bus. Messages sent while we were away are lost, so: stay 'down' (memory distrusted past
   * the degraded TTL), note the change sequence, drop every cache, then trust memory again.
   */
  private async catchUp(cause: 'connect' | 'reconnect') {
    this.setState('down')
    const upTo = await withTimeout(this.trust.sequenceValue(), 2000).catch(() => null)
    this.resync(cause, upTo)
    if (this.transport.open() && !this.closed) this.setState('ok')
  }

  private setState(s: BusState) {
    this.current = s
    busConnected.set(s === 'ok' ? 1 : 0)
  }

  private resync(cause: string, upTo: number | null) {
    busResyncs.labels(cause).inc()
    this.opts.log.info({ cause, node: this.nodeId }, 'bus resync: dropping cached state')
    this.trust.skipTo(upTo)
    this.deliver({ kind: 'resync' })
    this.trust.settle() // renewals whose numbers are now covered (by the drop just made) count
  }

  trusted(now: number): boolean {
    return this.trust.trusted(now)
  }

  private deliver(msg: BusMessage) {
    for (const h of this.handlers) {
      try {
        h(msg)
      } catch (err) {
        this.opts.log.error({ err: String(err), kind: msg.kind }, 'bus handler failed')
      }
    }
  }

  private onInvalidation(env: Envelope) {
    received.inc()
    // A numbered change comes twice, early without its number and then with it (publish-wait.ts): it
    // is applied once, and each copy is acked (the writer may have missed either ack).
    if (!this.applied.has(env.id)) {
      this.deliver(env.msg)
      if (numbered(env.msg)) this.applied.add(env.id)
    }
    if (env.seq !== null) this.trust.received(env.seq)
    if (numbered(env.msg)) this.transport.send(`ack.${env.from}`, { id: env.id, from: this.nodeId })
  }

  private sendInvalidation(id: string, seq: number | null, msg: BusMessage) {
    if (this.current !== 'ok' || !this.transport.open()) return
    if (seq !== null) sent.inc()
    this.transport.send('inv', { id, from: this.nodeId, seq, msg } satisfies Envelope)
  }

  async publish(msg: BusMessage): Promise<void> {
    if (!numbered(msg)) {
      // device broadcasts only save the others a read: sent when possible, never waited for
      this.deliver(msg)
      this.sendInvalidation(this.waits.newId(), null, msg)
      return
    }
    await this.waits.publish({
      kind: msg.kind,
      deliver: () => this.deliver(msg),
      send: (id, seq) => this.sendInvalidation(id, seq, msg),
      received: (seq) => this.trust.received(seq),
    })
  }

  subscribe(handler: (msg: BusMessage) => void): () => void {
    this.handlers.add(handler)
    return () => this.handlers.delete(handler)
  }

  onBarrier(handler: () => Promise<void>): () => void {
    return this.barriers.onBarrier(handler)
  }

  barrier(timeoutMs?: number): Promise<boolean> {
    return this.barriers.barrier(timeoutMs)
  }

  state(): BusState {
    return this.current
  }

  /** Leaves the membership, says goodbye (members stop waiting for this node at once) and drains. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const t of this.timers) clearInterval(t)
    this.waits.close()
    this.barriers.close()
    this.trust.stop()
    await withTimeout(leave(this.opts.sql, this.nodeId), 2000).catch(() => {})
    await this.transport.close()
    this.setState('down')
    this.handlers.clear()
  }
}

/** A set of the last `size` ids added (older ones are forgotten, oldest first). */
class RecentIds {
  private ids = new Set<string>()
  constructor(private readonly size: number) {}
  has(id: string): boolean {
    return this.ids.has(id)
  }
  add(id: string) {
    this.ids.add(id)
    if (this.ids.size > this.size) this.ids.delete(this.ids.values().next().value!)
  }
}

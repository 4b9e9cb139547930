// The cluster `Bus` on NATS core pub/sub. Subjects, under `keyward.<cluster id>` (see sql/009_cluster.sql):
//   .inv           invalidations and device broadcasts   {id, from, seq, msg}
//   .ack.<node>    a receiver's ack to the writer         {id, from}
//   .hb            heartbeats (live membership)            {node, hello?, bye?}
//   .barrier       a barrier request                       {id, from}
//   .barrier-done.<node>  a member ran its barrier handlers  {id, from}
// `publish` applies the message locally, sends it, and returns only when every node that may still
// answer from memory has dropped its copy or has provably stopped trusting its memory (the fault
// rule in ARCHITECTURE.md), whatever the bus is doing:
// - membership is in Postgres (cluster-nodes.ts), not in who was heard on NATS lately, so a writer
//   knows every node that may hold memory also while NATS is down or has just been restarted;
// - a node trusts its memory only under a lease it renews a few times a second from Postgres: a
//   renewal counts when the node has received every change numbered up to the sequence value read
//   after the renewal began, and lasts `trustWindowMs` from that start, measured on the node's own
//   monotonic clock. A node cut off from NATS (closed or silently paused) misses the next change,
//   cannot renew, and stops trusting its memory on its own; one cut off from Postgres cannot renew;
// - a writer waits for each member's ack on NATS, or for its row to report the change as seen; for
//   a member it hears neither from, it waits `trustWindowMs` (+ a margin) from after taking the
//   change's number: any renewal that did not include the change began before that, so it has run out.
//   Caches treat memory loaded within `trustWindowMs` (DEGRADED_TTL_MS) as fresh even untrusted, which
//   is safe for the same reason: the writer's wait is at least that long from after its commit.
// Clocks: only durations are compared across nodes (each on its own monotonic clock), plus Postgres'
// own clock for membership; the margin covers clock rate differences, not an offset between hosts.
// Two ways a node recovers from messages it never received (both emit a local `resync`: every cache
// drops everything, so it reads Postgres again):
// - on reconnect to NATS, at once (a fast path; the lease above is what keeps the promise);
// - every invalidation carries a number from a Postgres sequence; a node whose renewal finds the
//   sequence ahead of what it received resyncs, at once while NATS is down, else after the ack
//   window (the message may still be on its way). This also covers a *writer* whose connection was
//   cut (its receivers never learn they missed something) and silent network drops.
import { hostname } from 'node:os'
import { connect, type NatsConnection } from 'nats'
import client from 'prom-client'
import { BARRIER_TIMEOUT_MS, runBarrierHandlers, type Bus, type BusMessage, type BusState } from './bus'
import type { Sql } from './db'
import type { Logger } from './log'
import { announce, beat, leave, liveNodes, notYetSeen } from './cluster-nodes'
import { busConnected, invalidations, registry } from './metrics'

export interface NatsBusOptions {
  url: string
  sql: Sql
  log: Logger
  /** While NATS is up, how long a missing numbered change may take to arrive before the node resyncs. */
  ackTimeoutMs?: number
  heartbeatMs?: number
  /** How often the node renews its trust lease (and compares the change sequence with what it received). */
  seqPollMs?: number
  /** How long a renewal lets the node trust its memory (DEGRADED_TTL_MS); also the most a write waits. */
  trustWindowMs?: number
  /** How long startup waits for a first connection before serving in state 'down'. */
  connectWaitMs?: number
}

type Envelope = { id: string; from: string; seq: number | null; msg: BusMessage }
type Waiter = { missing: Set<string>; done: () => void }
/** A renewal read the sequence at `v`, having started at `s` (monotonic): it counts once all of `v` is in. */
type Renewal = { v: number; s: number }

/** Covers clock rate differences between the writer and the nodes it waits out (and timer lateness). */
const MARGIN_MS = 100
/** How long a writer tries to number its change (Postgres was up a moment ago, for its commit). */
const ANNOUNCE_MS = 2000
/** How often a waiting writer reads the rows of members it has no ack from. */
const SEEN_POLL_MS = 100

const resyncs = new client.Counter({
  name: 'keyward_bus_resyncs_total',
  help: 'Times this node dropped its memory because invalidations may have been missed, by cause',
  labelNames: ['cause'] as const,
  registers: [registry],
})
const publishWait = new client.Histogram({
  name: 'keyward_bus_publish_seconds',
  help: 'How long a write waited for its invalidation to be in force on every node (acks, seen rows, or leases run out)',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5],
  registers: [registry],
})
const sent = invalidations.labels('sent')
const received = invalidations.labels('received')
const acked = invalidations.labels('acked')
const ackTimeout = invalidations.labels('ack_timeout')

const enc = new TextEncoder()
const dec = new TextDecoder()
/** Messages that change an answer are numbered; device broadcasts only save a read and need no ack. */
const numbered = (m: BusMessage) => m.kind === 'key' || m.kind === 'keys' || m.kind === 'api_key' || m.kind === 'account'
const withTimeout = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), ms))])

export class NatsBus implements Bus {
  readonly nodeId = `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  private nc: NatsConnection | null = null
  private handlers = new Set<(msg: BusMessage) => void>()
  private members = new Map<string, number>()
  private waiters = new Map<string, Waiter>()
  private barriers = new Set<() => Promise<void>>()
  private barrierWaiters = new Map<string, Waiter>()
  private current: BusState = 'down'
  private closed = false
  private timers: ReturnType<typeof setInterval>[] = []
  private nextId = 0
  // Change-sequence bookkeeping: every number <= watermark is accounted for.
  private watermark = 0
  private seen = new Set<number>()
  private gap: { upTo: number; since: number } | null = null
  private readonly ackTimeoutMs: number
  private readonly heartbeatMs: number
  private readonly trustWindowMs: number
  private prefix = ''
  // Trust lease: until `leaseEnd` (performance.now()), mirrored as wall-clock `trustUntil` for callers.
  private leaseEnd = 0
  private trustUntil = 0
  private pending: Renewal[] = []
  private renewing = false
  private renewAgain = false

  private constructor(private opts: NatsBusOptions) {
    this.ackTimeoutMs = opts.ackTimeoutMs ?? 1000
    this.heartbeatMs = opts.heartbeatMs ?? 500
    this.trustWindowMs = opts.trustWindowMs ?? 2000
    busConnected.set(0)
  }

  /** Connects (waiting up to `connectWaitMs`; after that it keeps trying in the background). */
  static async start(opts: NatsBusOptions): Promise<NatsBus> {
    const bus = new NatsBus(opts)
    const [row] = await opts.sql<{ id: string }[]>`select id from cluster_identity limit 1`
    bus.prefix = `keyward.${row?.id ?? 'default'}`
    bus.watermark = await bus.sequenceValue()
    // Registered before anything is cached here: from now on every writer waits for this node.
    await bus.renew()
    const connecting = connect({
      servers: opts.url,
      name: `keyward ${bus.nodeId}`,
      noEcho: true, // a node applies its own messages locally, synchronously
      reconnect: true,
      maxReconnectAttempts: -1, // forever
      reconnectTimeWait: 250,
      reconnectJitter: 100,
      pingInterval: 1000, // a silently dead connection is noticed within ~2-3 s
      maxPingOut: 2,
      timeout: 2000,
      waitOnFirstConnect: true,
    }).then((nc) => bus.attach(nc))
    connecting.catch((err) => opts.log.error({ err: String(err) }, 'NATS connection failed for good'))
    await withTimeout(connecting, opts.connectWaitMs ?? 5000).catch(() =>
      opts.log.warn({ url: opts.url }, 'NATS unreachable at startup; serving in degraded mode until it connects'),
    )
    bus.timers.push(setInterval(() => bus.heartbeat(), bus.heartbeatMs))
    const pollMs = Math.max(20, Math.min(opts.seqPollMs ?? 500, Math.floor(bus.trustWindowMs / 4)))
    bus.timers.push(setInterval(() => void bus.renew(), pollMs))
    // Re-anchors the wall-clock view of the lease on the monotonic clock (a stepped wall clock).
    bus.timers.push(setInterval(() => bus.anchor(), 100))
    for (const t of bus.timers) (t as { unref?: () => void }).unref?.()
    return bus
  }

  private async attach(nc: NatsConnection) {
    if (this.closed) return void nc.close()
    this.nc = nc
    const on = <T>(subject: string, handle: (body: T) => void) =>
      nc.subscribe(`${this.prefix}.${subject}`, {
        callback: (err, m) => {
          if (err) return
          try {
            handle(JSON.parse(dec.decode(m.data)) as T)
          } catch (e) {
            this.opts.log.warn({ subject, err: String(e) }, 'ignored a malformed bus message')
          }
        },
      })
    // Subscriptions end with the connection (drain on close).
    on<Envelope>('inv', (env) => this.onMessage(env))
    on<{ id: string; from: string }>(`ack.${this.nodeId}`, (ack) => this.onAck(ack))
    on<{ node: string; hello?: boolean; bye?: boolean }>('hb', (hb) => this.onHeartbeat(hb))
    on<{ id: string; from: string }>('barrier', (req) => this.onBarrierRequest(req))
    on<{ id: string; from: string }>(`barrier-done.${this.nodeId}`, (done) => {
      const w = this.barrierWaiters.get(done.id)
      if (w && w.missing.delete(done.from) && w.missing.size === 0) w.done()
    })
    void this.watchStatus(nc)
    // Also on the first connection: a node that started while NATS was down has been serving.
    await this.catchUp('connect')
  }

  private async watchStatus(nc: NatsConnection) {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') this.setState('down')
      else if (s.type === 'reconnect') void this.catchUp('reconnect')
    }
  }

  /**
   * Back on the bus. Messages sent while we were away are lost, so: stay 'down' (memory distrusted past
   * the degraded TTL), note the change sequence, drop every cache, then trust memory again.
   */
  private async catchUp(cause: 'connect' | 'reconnect') {
    this.setState('down')
    const upTo = await withTimeout(this.sequenceValue(), 2000).catch(() => null)
    this.resync(cause, upTo)
    if (this.nc?.isClosed() === false && !this.closed) {
      this.send('hb', { node: this.nodeId, hello: true })
      this.setState('ok')
      // Give the members a moment to introduce themselves, so the first publish waits for all of them.
      await new Promise((r) => setTimeout(r, Math.min(200, this.heartbeatMs)))
    }
  }

  private setState(s: BusState) {
    this.current = s
    busConnected.set(s === 'ok' ? 1 : 0)
  }

  private resync(cause: string, upTo: number | null) {
    resyncs.labels(cause).inc()
    this.opts.log.info({ cause, node: this.nodeId }, 'bus resync: dropping cached state')
    if (upTo !== null) this.watermark = Math.max(this.watermark, upTo)
    this.gap = null
    this.prune()
    this.deliver({ kind: 'resync' })
    this.settlePending() // renewals whose numbers are now covered (by the drop just made) count
  }

  private async sequenceValue(): Promise<number> {
    const [row] = await this.opts.sql<{ v: string; called: boolean }[]>`select last_value::text as v, is_called as called from cluster_changes`
    return row && row.called ? Number(row.v) : 0
  }

  /**
   * One renewal: report what this node has seen, read the change sequence, and extend the lease when
   * everything up to it is in (now, or later when the missing messages arrive). A change that stays
   * missing (longer than a writer waits for acks, or at once when NATS is down) means a resync.
   */
  private async renew(): Promise<void> {
    if (this.closed) return
    if (this.renewing) return void (this.renewAgain = true)
    this.renewing = true
    try {
      const s = performance.now()
      const upTo = await withTimeout(beat(this.opts.sql, this.nodeId, this.watermark), this.trustWindowMs)
      this.prune()
      this.pending.push({ v: upTo, s })
      if (this.pending.length > 16) this.pending.shift()
      this.settlePending()
      const now = Date.now()
      if (this.watermark >= upTo) this.gap = null
      else {
        if (!this.gap || this.watermark >= this.gap.upTo) this.gap = { upTo, since: now }
        if (this.current !== 'ok' || now - this.gap.since >= this.ackTimeoutMs) {
          this.resync('missed_change', upTo)
          this.grant(s) // everything up to `upTo` is dropped; later changes are waited out by their writers
          this.renewAgain = true // tell waiting writers at once
        }
      }
    } catch {
      // Postgres unreachable or slow: no renewal, the lease runs out on its own
    } finally {
      this.renewing = false
    }
    if (this.renewAgain && !this.closed) {
      this.renewAgain = false
      void this.renew()
    }
  }

  /** Grants the lease for every renewal whose sequence value is now covered. */
  private settlePending() {
    let s = -1
    while (this.pending.length > 0 && this.pending[0]!.v <= this.watermark) s = this.pending.shift()!.s
    if (s >= 0) this.grant(s)
  }

  private grant(since: number) {
    const end = since + this.trustWindowMs
    if (end <= this.leaseEnd) return
    this.leaseEnd = end
    this.anchor()
  }

  private anchor() {
    this.trustUntil = Date.now() + (this.leaseEnd - performance.now())
  }

  /** Whether memory can be trusted at `now` (Date.now()): one comparison, called per request. */
  trusted(now: number): boolean {
    return now < this.trustUntil
  }

  private prune() {
    while (this.seen.has(this.watermark + 1)) this.seen.delete(++this.watermark)
    if (this.seen.size > 0) for (const n of this.seen) if (n <= this.watermark) this.seen.delete(n)
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

  private send(what: string, body: unknown) {
    try {
      this.nc?.publish(`${this.prefix}.${what}`, enc.encode(JSON.stringify(body)))
    } catch {
      // closed or draining connection: the sequence check and resync cover what was not sent
    }
  }

  private heartbeat() {
    if (this.current === 'ok') this.send('hb', { node: this.nodeId })
    // Silence on NATS ends NATS membership only: a writer still waits for a silent node (its lease).
    const cutoff = Date.now() - 3 * this.heartbeatMs
    for (const [node, at] of this.members) if (at < cutoff) this.members.delete(node)
  }

  private onHeartbeat(hb: { node: string; hello?: boolean; bye?: boolean }) {
    if (hb.node === this.nodeId) return
    if (hb.bye) return this.leave(hb.node)
    const known = this.members.has(hb.node)
    this.members.set(hb.node, Date.now())
    // A newcomer (or a node back from an outage) learns the members now rather than a heartbeat later.
    if (hb.hello && !known) this.send('hb', { node: this.nodeId })
  }

  private leave(node: string) {
    this.members.delete(node)
    for (const [id, w] of this.waiters) if (w.missing.delete(node) && w.missing.size === 0) this.settle(id)
  }

  private onMessage(env: Envelope) {
    if (env.from === this.nodeId) return
    received.inc()
    this.deliver(env.msg)
    if (env.seq !== null) {
      this.seen.add(env.seq)
      this.prune()
      this.settlePending()
    }
    if (numbered(env.msg)) this.send(`ack.${env.from}`, { id: env.id, from: this.nodeId })
  }

  private onAck(ack: { id: string; from: string }) {
    acked.inc()
    const w = this.waiters.get(ack.id)
    if (w && w.missing.delete(ack.from) && w.missing.size === 0) this.settle(ack.id)
  }

  private settle(id: string) {
    const w = this.waiters.get(id)
    this.waiters.delete(id)
    w?.done()
  }

  /** Live members: nodes heard from within three heartbeats. */
  liveMembers(): string[] {
    const cutoff = Date.now() - 3 * this.heartbeatMs
    return [...this.members].filter(([, at]) => at >= cutoff).map(([node]) => node)
  }

  async publish(msg: BusMessage): Promise<void> {
    if (!numbered(msg)) {
      // device broadcasts only save the others a read: sent when possible, never waited for
      this.deliver(msg)
      if (this.current === 'ok' && this.nc) this.send('inv', { id: `${this.nodeId}.${++this.nextId}`, from: this.nodeId, seq: null, msg } satisfies Envelope)
      return
    }
    // The writer committed just before this, so Postgres is up; bounded anyway. Members: every node
    // that renewed lately (a node that stopped renewing earlier has stopped trusting its memory).
    const windowMs = 2 * this.trustWindowMs + 1000
    const stopTimer = publishWait.startTimer()
    // Retried while a quick failure leaves time (a connection dropped between commit and here), 2 s in all.
    let ann: { seq: number; members: string[] } | null = null
    for (const until = performance.now() + ANNOUNCE_MS; !ann && performance.now() < until; ) {
      ann = await withTimeout(announce(this.opts.sql, this.nodeId, windowMs), until - performance.now()).catch(() => null)
      if (!ann) await new Promise((r) => setTimeout(r, 50))
    }
    const numberedAt = performance.now()
    if (!ann) {
      // No number: the others cannot notice a missed message, and we do not know who to wait for.
      // Send it anyway and wait out every lease (those that renew meanwhile are not covered: logged).
      this.opts.log.error({ kind: msg.kind }, 'invalidation could not be numbered (Postgres unreachable after the commit)')
      this.deliver(msg)
      if (this.current === 'ok' && this.nc) this.send('inv', { id: `${this.nodeId}.${++this.nextId}`, from: this.nodeId, seq: null, msg } satisfies Envelope)
      await new Promise((r) => setTimeout(r, this.trustWindowMs + MARGIN_MS))
      stopTimer()
      return
    }
    const seq = ann.seq
    this.seen.add(seq)
    this.prune()
    this.settlePending()
    this.deliver(msg)
    const missing = new Set(ann.members)
    if (missing.size === 0) return void stopTimer()
    const id = `${this.nodeId}.${++this.nextId}`
    let settle: () => void = () => {}
    const settled = new Promise<void>((done) => (settle = done))
    this.waiters.set(id, { missing, done: settle })
    if (this.current === 'ok' && this.nc) {
      sent.inc()
      this.send('inv', { id, from: this.nodeId, seq, msg } satisfies Envelope)
    }
    // Acks, rows that report the change as seen, or the members' leases running out: whichever is first.
    const deadline = numberedAt + this.trustWindowMs + MARGIN_MS
    try {
      for (;;) {
        const left = deadline - performance.now()
        if (missing.size === 0 || left <= 0 || this.closed) break
        let timer: ReturnType<typeof setTimeout> | undefined
        await Promise.race([settled, new Promise<void>((r) => (timer = setTimeout(r, Math.min(SEEN_POLL_MS, left))))])
        clearTimeout(timer)
        if (missing.size === 0) continue
        const still = await withTimeout(notYetSeen(this.opts.sql, [...missing], seq), Math.max(1, deadline - performance.now())).catch(() => null)
        if (still) for (const node of missing) if (!still.has(node)) missing.delete(node)
      }
    } finally {
      this.waiters.delete(id)
      stopTimer()
    }
    if (missing.size > 0) {
      ackTimeout.inc(missing.size)
      this.opts.log.warn({ kind: msg.kind, missing: [...missing] }, 'invalidation waited out: no ack from every member, their trust in memory has run out')
    }
  }

  subscribe(handler: (msg: BusMessage) => void): () => void {
    this.handlers.add(handler)
    return () => this.handlers.delete(handler)
  }

  onBarrier(handler: () => Promise<void>): () => void {
    this.barriers.add(handler)
    return () => this.barriers.delete(handler)
  }

  /**
   * Members: the nodes whose Postgres row was renewed lately (the same list a writer waits for), so a
   * node that is serving but silent on NATS counts as not confirmed rather than being forgotten.
   * A member confirms only after its handlers succeeded.
   */
  async barrier(timeoutMs = BARRIER_TIMEOUT_MS): Promise<boolean> {
    const local = runBarrierHandlers(this.barriers)
    local.catch(() => {}) // awaited below, after the members: not an unhandled rejection meanwhile
    const until = performance.now() + timeoutMs
    const members =
      this.current === 'ok' && this.nc
        ? await withTimeout(liveNodes(this.opts.sql, this.nodeId, 2 * this.trustWindowMs + 1000), timeoutMs).catch(() => null)
        : null
    let complete = members !== null
    if (members !== null && members.length > 0) {
      const id = `${this.nodeId}.b${++this.nextId}`
      const missing = new Set(members)
      let done: () => void = () => {}
      const confirmed = new Promise<void>((r) => (done = r))
      this.barrierWaiters.set(id, { missing, done })
      this.send('barrier', { id, from: this.nodeId })
      let timer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([confirmed, new Promise<void>((r) => (timer = setTimeout(r, Math.max(0, until - performance.now()))))])
      clearTimeout(timer)
      this.barrierWaiters.delete(id)
      complete = missing.size === 0
      if (!complete) this.opts.log.warn({ missing: [...missing] }, 'barrier: not every member confirmed in time')
    }
    await local
    return complete
  }

  private onBarrierRequest(req: { id: string; from: string }) {
    if (req.from === this.nodeId || this.closed) return
    runBarrierHandlers(this.barriers).then(
      () => this.send(`barrier-done.${req.from}`, { id: req.id, from: this.nodeId }),
      (err) => this.opts.log.warn({ err: String(err) }, 'barrier handlers failed: not confirmed'),
    )
  }

  state(): BusState {
    return this.current
  }

  /** Says goodbye (members stop waiting for this node at once) and drains the connection. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const t of this.timers) clearInterval(t)
    for (const id of [...this.waiters.keys()]) this.settle(id)
    for (const w of this.barrierWaiters.values()) w.done()
    this.barriers.clear()
    this.leaseEnd = 0
    this.trustUntil = 0
    await withTimeout(leave(this.opts.sql, this.nodeId), 2000).catch(() => {})
    const nc = this.nc
    if (nc && !nc.isClosed()) {
      this.send('hb', { node: this.nodeId, bye: true })
      await withTimeout(nc.drain(), 2000).catch(() => nc.close())
    }
    this.setState('down')
    this.handlers.clear()
  }
}

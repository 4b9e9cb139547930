// The cluster `Bus` on NATS core pub/sub. Subjects, under `keyward.<cluster id>` (see sql/009_cluster.sql):
//   .inv           invalidations and device broadcasts   {id, from, seq, msg}
//   .ack.<node>    a receiver's ack to the writer         {id, from}
//   .hb            heartbeats (live membership)            {node, hello?, bye?}
// `publish` applies the message locally, sends it, and waits (bounded) until every node heard from in
// the last few heartbeats acked it: a revoke returns only after every live copy is gone.
// Two independent safety nets for messages that were never received:
// - on reconnect the node keeps state 'down' (hot state distrusts memory past DEGRADED_TTL_MS), then
//   emits a local `resync` (every cache drops everything) before it trusts memory again;
// - every invalidation carries a number from a Postgres sequence; a node that sees the sequence ahead
//   of what it received for longer than the ack window resyncs. This also covers a *writer* whose
//   connection was cut (its receivers never learn they missed something) and silent network drops.
import { hostname } from 'node:os'
import { connect, type NatsConnection } from 'nats'
import client from 'prom-client'
import type { Bus, BusMessage, BusState } from './bus'
import type { Sql } from './db'
import type { Logger } from './log'
import { busConnected, invalidations, registry } from './metrics'

export interface NatsBusOptions {
  url: string
  sql: Sql
  log: Logger
  /** How long `publish` waits for acks before returning anyway. */
  ackTimeoutMs?: number
  heartbeatMs?: number
  /** How often the change sequence is compared with what was received. */
  seqPollMs?: number
  /** How long startup waits for a first connection before serving in state 'down'. */
  connectWaitMs?: number
}

type Envelope = { id: string; from: string; seq: number | null; msg: BusMessage }
type Waiter = { missing: Set<string>; done: () => void }

const resyncs = new client.Counter({
  name: 'keyward_bus_resyncs_total',
  help: 'Times this node dropped its memory because invalidations may have been missed, by cause',
  labelNames: ['cause'] as const,
  registers: [registry],
})
const sent = invalidations.labels('sent')
const received = invalidations.labels('received')
const acked = invalidations.labels('acked')
const ackTimeout = invalidations.labels('ack_timeout')

const enc = new TextEncoder()
const dec = new TextDecoder()
/** Messages that change an answer are numbered; device broadcasts only save a read and need no ack. */
const numbered = (m: BusMessage) => m.kind === 'key' || m.kind === 'api_key' || m.kind === 'account'
const withTimeout = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), ms))])

export class NatsBus implements Bus {
  readonly nodeId = `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  private nc: NatsConnection | null = null
  private handlers = new Set<(msg: BusMessage) => void>()
  private members = new Map<string, number>()
  private waiters = new Map<string, Waiter>()
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
  private prefix = ''

  private constructor(private opts: NatsBusOptions) {
    this.ackTimeoutMs = opts.ackTimeoutMs ?? 1000
    this.heartbeatMs = opts.heartbeatMs ?? 500
    busConnected.set(0)
  }

  /** Connects (waiting up to `connectWaitMs`; after that it keeps trying in the background). */
  static async start(opts: NatsBusOptions): Promise<NatsBus> {
    const bus = new NatsBus(opts)
    const [row] = await opts.sql<{ id: string }[]>`select id from cluster_identity limit 1`
    bus.prefix = `keyward.${row?.id ?? 'default'}`
    bus.watermark = await bus.sequenceValue()
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
    bus.timers.push(setInterval(() => bus.checkSequence().catch(() => {}), opts.seqPollMs ?? 500))
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
  }

  private async sequenceValue(): Promise<number> {
    const [row] = await this.opts.sql<{ v: string; called: boolean }[]>`select last_value::text as v, is_called as called from cluster_changes`
    return row && row.called ? Number(row.v) : 0
  }

  /** Resyncs when a numbered change stays unreceived for longer than a writer waits for acks. */
  private async checkSequence() {
    if (this.closed) return
    const upTo = await this.sequenceValue()
    this.prune()
    const now = Date.now()
    if (this.watermark >= upTo) this.gap = null
    else if (!this.gap || this.watermark >= this.gap.upTo) this.gap = { upTo, since: now }
    else if (now - this.gap.since >= this.ackTimeoutMs) this.resync('missed_change', upTo)
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
    const cutoff = Date.now() - 3 * this.heartbeatMs
    for (const [node, at] of this.members) if (at < cutoff) this.leave(node)
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
    if (env.seq !== null) this.seen.add(env.seq)
    this.deliver(env.msg)
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
    let seq: number | null = null
    if (numbered(msg)) {
      // The writer committed just before this, so Postgres is up; bounded anyway.
      const row = await withTimeout(this.opts.sql<{ n: string }[]>`select nextval('cluster_changes')::text as n`, 2000).catch(() => null)
      seq = row?.[0] ? Number(row[0].n) : null
    }
    if (seq !== null) this.seen.add(seq)
    this.deliver(msg)
    if (this.current !== 'ok' || !this.nc) return // the others notice the gap in the sequence
    const id = `${this.nodeId}.${++this.nextId}`
    sent.inc()
    const waitFor = numbered(msg) ? this.liveMembers() : []
    const settled = waitFor.length
      ? new Promise<void>((done) => this.waiters.set(id, { missing: new Set(waitFor), done }))
      : null
    this.send('inv', { id, from: this.nodeId, seq, msg } satisfies Envelope)
    if (!settled) return
    let timer: ReturnType<typeof setTimeout> | undefined
    await Promise.race([settled, new Promise<void>((r) => (timer = setTimeout(r, this.ackTimeoutMs)))])
    clearTimeout(timer)
    const w = this.waiters.get(id)
    if (w) {
      this.waiters.delete(id)
      ackTimeout.inc(w.missing.size)
      this.opts.log.warn({ kind: msg.kind, missing: [...w.missing] }, 'invalidation not acked by every live node in time')
    }
  }

  subscribe(handler: (msg: BusMessage) => void): () => void {
    this.handlers.add(handler)
    return () => this.handlers.delete(handler)
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
    const nc = this.nc
    if (nc && !nc.isClosed()) {
      this.send('hb', { node: this.nodeId, bye: true })
      await withTimeout(nc.drain(), 2000).catch(() => nc.close())
    }
    this.setState('down')
    this.handlers.clear()
  }
}

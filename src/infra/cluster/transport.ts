// The cluster bus's NATS transport: one connection, subjects under `keyward.<cluster id>` (see
// sql/009_cluster.sql), JSON bodies. It knows nothing of numbering or waiting: it hands what arrives
// to the bus and tells it when the connection goes down or comes back (messages may have been missed).
//   .inv                   invalidations and device broadcasts     {id, from, seq, msg}
//   .ack.<node>            a receiver's ack to the writer           {id, from}
//   .hb                    a node's goodbye as it stops             {node, bye: true}
//   .barrier               a barrier request                        {id, from}
//   .barrier-done.<node>   a member ran its barrier handlers        {id, from}
// (`.hb` once also carried periodic heartbeats and hellos; membership is now Postgres's alone, and
// those are ignored, so nodes of both kinds can run side by side during a rolling deploy.)
import { connect, type NatsConnection } from 'nats'
import type { BusMessage } from '../bus'
import type { Logger } from '../log'

export type Envelope = { id: string; from: string; seq: number | null; msg: BusMessage }
export type Reply = { id: string; from: string }

export interface TransportEvents {
  invalidation(env: Envelope): void
  ack(ack: Reply): void
  bye(node: string): void
  barrierRequest(req: Reply): void
  barrierDone(done: Reply): void
  /** The connection dropped: what is sent meanwhile is lost. */
  down(): void
  /** Connected for the first time or again: what was sent meanwhile was lost. */
  back(cause: 'connect' | 'reconnect'): Promise<void>
}

const enc = new TextEncoder()
const dec = new TextDecoder()

export class NatsTransport {
  private nc: NatsConnection | null = null
  private closed = false

  constructor(
    private readonly prefix: string,
    private readonly nodeId: string,
    private readonly log: Logger,
    private readonly events: TransportEvents,
  ) {}

  /** Starts connecting (forever, in the background); resolves once connected and subscribed. */
  connect(url: string): Promise<void> {
    const connecting = connect({
      servers: url,
      name: `keyward ${this.nodeId}`,
      noEcho: true, // a node applies its own messages locally, synchronously
      reconnect: true,
      maxReconnectAttempts: -1, // forever
      reconnectTimeWait: 250,
      reconnectJitter: 100,
      pingInterval: 1000, // a silently dead connection is noticed within ~2-3 s
      maxPingOut: 2,
      timeout: 2000,
      waitOnFirstConnect: true,
    }).then((nc) => this.attach(nc))
    connecting.catch((err) => this.log.error({ err: String(err) }, 'NATS connection failed for good'))
    return connecting
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
            this.log.warn({ subject, err: String(e) }, 'ignored a malformed bus message')
          }
        },
      })
    // Subscriptions end with the connection (drain on close).
    const ev = this.events
    on<Envelope>('inv', (env) => env.from !== this.nodeId && ev.invalidation(env))
    on<Reply>(`ack.${this.nodeId}`, (ack) => ev.ack(ack))
    on<{ node: string; bye?: boolean }>('hb', (hb) => hb.bye && hb.node !== this.nodeId && ev.bye(hb.node))
    on<Reply>('barrier', (req) => req.from !== this.nodeId && ev.barrierRequest(req))
    on<Reply>(`barrier-done.${this.nodeId}`, (done) => ev.barrierDone(done))
    // The server has the subscriptions before anyone counts on this node hearing them.
    await nc.flush().catch(() => {})
    void this.watchStatus(nc)
    // Also on the first connection: a node that started while NATS was down has been serving.
    await ev.back('connect')
  }

  private async watchStatus(nc: NatsConnection) {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') this.events.down()
      else if (s.type === 'reconnect') void this.events.back('reconnect')
    }
  }

  /** Whether there is a connection to send on (it may still drop what is sent). */
  open(): boolean {
    return !this.closed && this.nc !== null && !this.nc.isClosed()
  }

  send(subject: string, body: unknown) {
    try {
      this.nc?.publish(`${this.prefix}.${subject}`, enc.encode(JSON.stringify(body)))
    } catch {
      // closed or draining connection: the sequence check and resync cover what was not sent
    }
  }

  /** Says goodbye (writers stop waiting for this node at once) and drains the connection. */
  async close(): Promise<void> {
    this.closed = true
    const nc = this.nc
    if (nc && !nc.isClosed()) {
      this.send('hb', { node: this.nodeId, bye: true })
      await withTimeout(nc.drain(), 2000).catch(() => nc.close())
    }
  }
}

/**
 * `p`, or a rejection (`timeout`) once `ms` have passed. The timer is cleared as soon as `p` settles:
 * left running, each call (one per publish wait, beat and barrier) would hold a timer for its whole
 * `ms`, and a stopping process would wait for the last of them.
 */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms)
  })
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer))
}

// The barrier: every node runs its barrier handlers (e.g. writes what it batches in memory) and
// confirms. Members are the nodes whose Postgres row was renewed lately (the same list a writer waits
// for), so a node that is serving but silent on NATS counts as not confirmed rather than being
// forgotten. A member confirms only after its handlers succeeded.
import { BARRIER_TIMEOUT_MS, runBarrierHandlers } from '../bus'
import type { Sql } from '../db'
import type { Logger } from '../log'
import { liveNodes } from '../cluster-nodes'
import { withTimeout, type Reply } from './transport'

type Waiter = { missing: Set<string>; done: () => void }

export interface BarrierOptions {
  sql: Sql
  log: Logger
  nodeId: string
  trustWindowMs: number
  /** Whether the bus is up, so that members can be asked at all. */
  busUp: () => boolean
  send: (subject: string, body: Reply) => void
  newId: () => string
}

export class Barriers {
  private handlers = new Set<() => Promise<void>>()
  private waiters = new Map<string, Waiter>()
  private closed = false

  constructor(private readonly opts: BarrierOptions) {}

  onBarrier(handler: () => Promise<void>): () => void {
    this.handlers.add(handler)
    return () => this.handlers.delete(handler)
  }

  async barrier(timeoutMs = BARRIER_TIMEOUT_MS): Promise<boolean> {
    const { sql, log, nodeId, trustWindowMs } = this.opts
    const local = runBarrierHandlers(this.handlers)
    local.catch(() => {}) // awaited below, after the members: not an unhandled rejection meanwhile
    const until = performance.now() + timeoutMs
    const members = this.opts.busUp()
      ? await withTimeout(liveNodes(sql, nodeId, 2 * trustWindowMs + 1000), timeoutMs).catch(() => null)
      : null
    let complete = members !== null
    if (members !== null && members.length > 0) {
      const id = this.opts.newId()
      const missing = new Set(members)
      let done: () => void = () => {}
      const confirmed = new Promise<void>((r) => (done = r))
      this.waiters.set(id, { missing, done })
      this.opts.send('barrier', { id, from: nodeId })
      let timer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([confirmed, new Promise<void>((r) => (timer = setTimeout(r, Math.max(0, until - performance.now()))))])
      clearTimeout(timer)
      this.waiters.delete(id)
      complete = missing.size === 0
      if (!complete) log.warn({ missing: [...missing] }, 'barrier: not every member confirmed in time')
    }
    await local
    return complete
  }

  /** Another node asks: run the handlers, confirm only if they succeeded. */
  onRequest(req: Reply) {
    if (this.closed) return
    runBarrierHandlers(this.handlers).then(
      () => this.opts.send(`barrier-done.${req.from}`, { id: req.id, from: this.opts.nodeId }),
      (err) => this.opts.log.warn({ err: String(err) }, 'barrier handlers failed: not confirmed'),
    )
  }

  onDone(done: Reply) {
    const w = this.waiters.get(done.id)
    if (w && w.missing.delete(done.from) && w.missing.size === 0) w.done()
  }

  close() {
    this.closed = true
    for (const w of this.waiters.values()) w.done()
    this.handlers.clear()
  }
}

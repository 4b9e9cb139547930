// The access log of the validate fast path: the same line the kernel writes through pino
// ({level, time, bindings, method, route, status, ms, request_id}), built by hand and written to
// pino's own destination once per event-loop turn. Measured: pino's per-call serialisation, redaction
// and per-write buffer bookkeeping cost about as much as the whole validate decision, so at tens of
// thousands of requests per second they would be the largest item on the hot path. None of these
// fields can hold a secret (the request id is checked against a strict pattern before use).
import pino from 'pino'
import type { Logger } from '../../infra/log'

const { streamSym, chindingsSym, timeSym } = pino.symbols

// pino's documented symbols: the destination, the serialised bindings (`,"pid":…`), the time function.
type Internals = Record<symbol, unknown>
const stream = (l: Internals) => l[streamSym] as { write(s: string): unknown }
const bindings = (l: Internals) => l[chindingsSym] as string
const time = (l: Internals) => (l[timeSym] as () => string)()

export class AccessLog {
  private lines: string[] = []
  private scheduled = false
  /** The time field changes once per millisecond; tens of lines share it at load. */
  private lastMs = 0
  private lastTime = ''

  constructor(private log: Logger) {}

  write(method: string, route: string, status: number, ms: number, requestId: string) {
    if (!this.log.isLevelEnabled('info')) return
    const l = this.log as unknown as Internals
    const now = Date.now()
    if (now !== this.lastMs) {
      this.lastMs = now
      this.lastTime = time(l)
    }
    this.lines.push(
      `{"level":30${this.lastTime}${bindings(l)},"method":"${method}","route":"${route}","status":${status},` +
        `"ms":${ms},"request_id":"${requestId}"}\n`,
    )
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(() => this.flush())
    }
  }

  flush() {
    this.scheduled = false
    if (this.lines.length === 0) return
    const batch = this.lines.join('')
    this.lines = []
    stream(this.log as unknown as Internals).write(batch)
  }
}

// The access log of the routes served outside the framework (the validate fast path): the same line
// the kernel writes through pino ({level, time, bindings, method, route, status, ms, request_id}),
// built by hand and written to pino's own destination in batches. Measured: pino's per-call serialisation, redaction
// and per-write buffer bookkeeping cost about as much as the whole validate decision, so at tens of
// thousands of requests per second they would be the largest item on the hot path. None of these
// fields can hold a secret (the request id is checked against a strict pattern before use).
// Batches go by size or age rather than once per event-loop turn: each asynchronous write to the
// destination costs tens of µs of CPU in Bun whatever its size (measured ≈50–70 µs for 4–150 KB), which
// a turn of a few requests cannot amortise. Lines wait at most MAX_WAIT_MS in memory (≈0.6 MB at most);
// the node flushes them at shutdown (node.ts) before pino's own buffer.
// This is the one file that reads pino's internals (through `pino.symbols`, which pino exports for
// this kind of use but does not promise to keep): test/infra/access-log.test.ts holds the line written
// here against the line pino writes itself, so a pino upgrade that changes them fails there.
import pino from 'pino'
import { flatten } from './crypto'
import type { Logger } from './log'

const { streamSym, chindingsSym, timeSym } = pino.symbols

// The destination, the serialised bindings (`,"pid":…`), the time function (`,"time":…`).
type Internals = Record<symbol, unknown>
const stream = (l: Internals) => l[streamSym] as { write(s: string): unknown }
const bindings = (l: Internals) => l[chindingsSym] as string
const time = (l: Internals) => (l[timeSym] as () => string)()

const MAX_LINES = 4096
const MAX_WAIT_MS = 50

/** Writes to `log`'s destination; built once per node (buildDeps), flushed at its shutdown. */
export class AccessLog {
  private lines: string[] = []
  private timer: Timer | null = null
  /** Everything before the status changes once per millisecond: tens of lines share it at load. */
  private lastMs = 0
  private lastMethod = ''
  private lastRoute = ''
  private prefix = ''

  constructor(private log: Logger) {}

  write(method: string, route: string, status: number, ms: number, requestId: string) {
    if (!this.log.isLevelEnabled('info')) return
    const l = this.log as unknown as Internals
    const now = Date.now()
    if (now !== this.lastMs || method !== this.lastMethod || route !== this.lastRoute) {
      this.lastMs = now
      this.lastMethod = method
      this.lastRoute = route
      this.prefix = flatten(`{"level":30${time(l)}${bindings(l)},"method":"${method}","route":"${route}","status":`)
    }
    this.lines.push(`${this.prefix}${status},"ms":${ms},"request_id":"${requestId}"}\n`)
    if (this.lines.length >= MAX_LINES) this.flush()
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), MAX_WAIT_MS).unref()
  }

  flush() {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    if (this.lines.length === 0) return
    const batch = this.lines.join('')
    this.lines = []
    stream(this.log as unknown as Internals).write(batch)
  }
}

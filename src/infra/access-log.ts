// The access log of the routes served outside the framework (the validate fast path): the same line
// the kernel writes through pino ({level, time, bindings, method, route, status, ms, request_id}),
// built by hand and written in batches. Measured: pino's per-call serialisation, redaction and
// per-write buffer bookkeeping cost about as much as the whole validate decision, so at tens of
// thousands of requests per second they would be the largest item on the hot path. None of these
// fields can hold a secret (the request id is checked against a strict pattern before use).
//
// Lines are copied into a buffer as they come and go out by size or age (MAX_WAIT_MS), not once per
// event-loop turn: each asynchronous write costs tens of µs of CPU in Bun whatever its size.
// - To a regular file (as deployed) or /dev/null, the buffer is written to pino's file descriptor as
//   bytes, one write at a time. A batch handed to pino's destination instead is a string of ~200 KB
//   that sonic-boom encodes twice; with its garbage that cost ≈3 µs per validate at load (measured with
//   the access log on and off, same run): 10% of the route's CPU. A write to a regular file is never
//   split or interleaved with pino's own writes on the same descriptor.
// - To a pipe, a socket or a terminal (where a large write may be split and interleave with pino's),
//   the batch goes through pino's destination as a string, as before.
// Lines wait at most MAX_WAIT_MS in memory; the node drains them at shutdown (node.ts) before pino's own
// buffer.
// This is the one file that reads pino's internals (through `pino.symbols`, which pino exports for
// this kind of use but does not promise to keep, and the destination's `fd`): test/infra/access-log.test.ts
// holds the line written here against the line pino writes itself, so a pino upgrade that changes them
// fails there.
import { fstatSync, write as writeFd } from 'node:fs'
import { isatty } from 'node:tty'
import pino from 'pino'
import type { Logger } from './log'

const { streamSym, chindingsSym, timeSym } = pino.symbols

// The destination, the serialised bindings (`,"pid":…`), the time function (`,"time":…`).
type Internals = Record<symbol, unknown>
const stream = (l: Internals) => l[streamSym] as { write(s: string): unknown; fd?: number }
const bindings = (l: Internals) => l[chindingsSym] as string
const time = (l: Internals) => (l[timeSym] as () => string)()

/** One batch's buffer: ~1,500 lines; a full one goes out at once. */
const CAPACITY = 256 * 1024
/** Room for a line's part after the prefix: status, ms, `request_id` (at most 128 characters), punctuation. */
const TAIL_MAX = 256
const MAX_WAIT_MS = 50

const MS_FIELD = ',"ms":'
const ID_FIELD = ',"request_id":"'

/** ASCII text at `pos` (short: a loop is cheaper than a typed-array copy at this size); returns the position after it. */
function writeAscii(buf: Buffer, pos: number, text: string): number {
  for (let i = 0; i < text.length; i++) buf[pos++] = text.charCodeAt(i)
  return pos
}

/** A non-negative integer's decimal digits at `pos`; returns the position after them. */
function writeInteger(buf: Buffer, pos: number, n: number): number {
  if (n >= 10) pos = writeInteger(buf, pos, Math.floor(n / 10))
  buf[pos] = 0x30 + (n % 10)
  return pos + 1
}

/** `hundredths` / 100 as JSON.stringify prints it (no trailing zeros, no point for a whole number). */
function writeHundredths(buf: Buffer, pos: number, hundredths: number): number {
  const whole = Math.floor(hundredths / 100)
  const frac = hundredths - whole * 100
  pos = writeInteger(buf, pos, whole)
  if (frac === 0) return pos
  buf[pos++] = 0x2e // .
  buf[pos++] = 0x30 + Math.floor(frac / 10)
  if (frac % 10 !== 0) buf[pos++] = 0x30 + (frac % 10)
  return pos
}

/** Whether `fd` takes whole writes that never interleave with another writer's: a regular file or /dev/null. */
function takesWholeWrites(fd: number): boolean {
  try {
    const st = fstatSync(fd)
    return st.isFile() || (st.isCharacterDevice() && !isatty(fd))
  } catch {
    return false
  }
}

/** Writes to `log`'s destination; built once per node (buildDeps), drained at its shutdown. */
export class AccessLog {
  private buf: Buffer = Buffer.allocUnsafe(CAPACITY)
  private pos = 0
  private timer: Timer | null = null
  /** Everything before the status changes once per millisecond: tens of lines share it at load. */
  private lastMs = 0
  private lastMethod = ''
  private lastRoute = ''
  private prefix: Buffer = Buffer.alloc(0)
  /** The descriptor batches are written to as bytes (null: through pino's destination); decided once it is open. */
  private fd: number | null | undefined = undefined
  /** Batches waiting for the one write in flight, oldest first; spare buffers to reuse. */
  private queue: { buf: Buffer; from: number; to: number }[] = []
  private writing = false
  private spares: Buffer[] = []
  private drained: (() => void)[] = []

  /** Whether info lines are written: the level is set once, at startup (config.ts). */
  private readonly enabled: boolean

  constructor(private log: Logger) {
    this.enabled = log.isLevelEnabled('info')
  }

  /** `ms`: the duration, in hundredths of a millisecond at most (as JSON prints it: 0.05, 1.5, 12). */
  write(method: string, route: string, status: number, ms: number, requestId: string) {
    if (!this.enabled) return
    const now = Date.now()
    if (now !== this.lastMs || method !== this.lastMethod || route !== this.lastRoute) {
      const l = this.log as unknown as Internals
      this.lastMs = now
      this.lastMethod = method
      this.lastRoute = route
      // the bindings (hostname) may hold any character: encoded once here, copied as bytes per line
      this.prefix = Buffer.from(`{"level":30${time(l)}${bindings(l)},"method":"${method}","route":"${route}","status":`, 'utf8')
    }
    if (this.pos + this.prefix.length + TAIL_MAX > CAPACITY) this.flush()
    // The rest is ASCII, written byte by byte: a template string with a float in it (number to text,
    // a new string, its encoding) cost ≈4x as much per line. The request id passed a strict pattern
    // (http/kernel.ts) or is one of ours.
    const buf = this.buf
    buf.set(this.prefix, this.pos)
    let pos = writeInteger(buf, this.pos + this.prefix.length, status)
    pos = writeAscii(buf, pos, MS_FIELD)
    pos = writeHundredths(buf, pos, Math.round(ms * 100))
    pos = writeAscii(buf, writeAscii(buf, pos, ID_FIELD), requestId)
    buf[pos++] = 0x22 // "
    buf[pos++] = 0x7d // }
    buf[pos++] = 0x0a // \n
    this.pos = pos
    if (this.timer === null) this.timer = setTimeout(() => this.flush(), MAX_WAIT_MS).unref()
  }

  /** Sends the lines written so far on their way (they are written asynchronously). */
  flush() {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    }
    if (this.pos === 0) return
    const dest = stream(this.log as unknown as Internals)
    if (this.fd === undefined && typeof dest.fd === 'number' && dest.fd >= 0) this.fd = takesWholeWrites(dest.fd) ? dest.fd : null
    if (typeof this.fd !== 'number') {
      // a pipe, socket or terminal, or a file pino has not opened yet: through pino's destination
      dest.write(this.buf.toString('utf8', 0, this.pos))
      this.pos = 0
      return
    }
    this.queue.push({ buf: this.buf, from: 0, to: this.pos })
    this.buf = this.spares.pop() ?? Buffer.allocUnsafe(CAPACITY)
    this.pos = 0
    this.next()
  }

  /** Writes every line written so far; resolves once they are in the destination (or failed). */
  drain(): Promise<void> {
    this.flush()
    if (!this.writing) return Promise.resolve()
    return new Promise((done) => this.drained.push(done))
  }

  private next() {
    if (this.writing) return
    const batch = this.queue.shift()
    if (batch === undefined) {
      for (const done of this.drained.splice(0)) done()
      return
    }
    this.writing = true
    writeFd(this.fd!, batch.buf, batch.from, batch.to - batch.from, null, (err, written) => {
      this.writing = false
      if (err) {
        // the descriptor failed: this batch and the rest go through pino's destination from now on
        this.fd = null
        const dest = stream(this.log as unknown as Internals)
        for (const b of [batch, ...this.queue.splice(0)]) dest.write(b.buf.toString('utf8', b.from, b.to))
      } else if (batch.from + written < batch.to) this.queue.unshift({ ...batch, from: batch.from + written })
      else if (this.spares.length < 2) this.spares.push(batch.buf)
      this.next()
    })
  }
}

// How the Postgres pool opens its sockets (postgres.js's `socket` option), so that opening a connection
// has the policy a service needs rather than the driver's defaults:
// - postgres.js binds the query that made it open a connection to that connection. When the attempt
//   times out (a backend slow to start while the machine is saturated: exactly when the pool grows),
//   the query fails although Postgres is up and the other connections answer. Here an attempt that
//   got no byte from the server within `startupMs` is closed quietly instead: postgres.js then retries
//   the connect with the same query, which was never sent, so the retry is always safe.
// - When a socket closes before the server said anything (an endpoint that accepts and closes),
//   postgres.js reconnects at once, forever, and the query waits forever. Here those retries are
//   spaced out, and once nothing has been heard from the server for `budgetMs` the attempt fails with
//   CONNECT_TIMEOUT: the query is rejected (a 503 upstream). One real attempt per `probeMs` goes on,
//   so the pool recovers by itself.
// - A refused connection (Postgres down) fails the query at once, as before.
import net from 'node:net'
import { EventEmitter } from 'node:events'

export interface SocketPolicy {
  /** Longest wait for the server's first byte on a new connection before a quiet retry. */
  startupMs: number
  /** Failed attempts with nothing heard from the server for this long: queries fail instead of waiting. */
  budgetMs: number
  /** While failing, one real attempt per this period (the others fail at once). */
  probeMs: number
}

export const DEFAULT_SOCKET_POLICY: SocketPolicy = { startupMs: 5_000, budgetMs: 1_000, probeMs: 250 }

type Options = { host: string[]; port: number[]; path?: string | false }

/**
 * What postgres.js gets: the TCP socket behind a thin wrapper that delivers `close` one turn later.
 * postgres.js batches writes in a buffer flushed by `setImmediate` and does not clear that buffer when
 * the socket closes; a close between its write and the flush (a server that closes at once) leaves the
 * startup message in the buffer, the next connection sends it twice, and Postgres answers
 * "invalid frontend message type 0". Delivered later, the close finds the buffer flushed (into the
 * closed socket, where writes are dropped). Also stands for an attempt that failed before connecting:
 * it errors and closes once postgres.js has attached its listeners.
 */
class PgSocket extends EventEmitter {
  private closed = false
  /** Set before the close is delivered: postgres.js gets this error first (its query fails, no retry). */
  failure: Error | null = null

  constructor(private readonly socket: net.Socket | null, failure?: Error) {
    super()
    if (!socket) {
      this.closed = true
      setImmediate(() => {
        this.emit('error', failure)
        setImmediate(() => this.emit('close', true))
      })
      return
    }
    socket.on('data', (chunk) => this.emit('data', chunk))
    socket.on('drain', () => this.emit('drain'))
    socket.on('error', (err) => this.emit('error', err))
    socket.on('close', (hadError) => {
      this.closed = true
      // As a net.Socket does: an error, then the close a turn later (what the error's handlers write in
      // between, e.g. a rollback, finds the socket still there and is dropped, not a null socket).
      setImmediate(() => {
        const failure = this.failure
        if (failure) this.emit('error', failure)
        setImmediate(() => this.emit('close', hadError || failure !== null))
      })
    })
  }

  get readyState(): string {
    return this.closed || !this.socket ? 'closed' : this.socket.readyState
  }

  write(chunk: Uint8Array, cb?: (err?: Error | null) => void): boolean {
    if (this.closed || !this.socket) return true
    return this.socket.write(chunk, cb)
  }

  end(chunk?: Uint8Array) {
    if (this.closed || !this.socket) return
    if (chunk) this.socket.end(chunk)
    else this.socket.end()
  }

  destroy(err?: Error) {
    this.socket?.destroy(err)
  }

  setKeepAlive(enable: boolean, delayMs: number) {
    this.socket?.setKeepAlive(enable, delayMs)
  }
}

function connectError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, errno: code })
}

/** A `socket` option for postgres.js with the policy above; its state is per pool. */
export function socketFactory(policy: SocketPolicy = DEFAULT_SOCKET_POLICY) {
  /** Last time a socket of this pool received bytes (any connection: the server is alive). */
  let lastHeard = performance.now()
  /** Start of the oldest attempt in the current run of failed ones (null: none failing). */
  let failingSince: number | null = null
  let earlyCloses = 0
  let lastProbe = 0

  const heard = () => {
    lastHeard = performance.now()
    failingSince = null
    earlyCloses = 0
  }

  const exhausted = (now: number) => failingSince !== null && now - Math.max(lastHeard, failingSince) >= policy.budgetMs

  return async function open(options: Options): Promise<PgSocket> {
    if (earlyCloses > 0) await Bun.sleep(Math.min(20 * 2 ** (earlyCloses - 1), policy.probeMs)) // no busy loop
    const now = performance.now()
    if (exhausted(now)) {
      if (now - lastProbe < policy.probeMs) {
        return new PgSocket(null, connectError('CONNECT_TIMEOUT', 'Postgres accepts connections but does not answer on them'))
      }
      lastProbe = now
    }
    const started = performance.now()
    const socket = options.path ? net.connect(options.path) : net.connect(options.port[0]!, options.host[0]!)
    const ok = await new Promise<true | Error>((resolve) => {
      const timer = setTimeout(() => resolve(connectError('CONNECT_TIMEOUT', 'TCP connect to Postgres timed out')), policy.startupMs)
      socket.once('connect', () => (clearTimeout(timer), resolve(true)))
      socket.once('error', (err) => (clearTimeout(timer), resolve(err)))
    })
    if (ok !== true) {
      socket.destroy()
      return new PgSocket(null, ok)
    }
    let spoke = false
    let wrapped: PgSocket | null = null
    // Server silent: a quiet close (no error) makes postgres.js reconnect with the same, unsent, query;
    // past the budget, a close with an error rejects the query instead.
    const watchdog = setTimeout(() => {
      failingSince ??= started
      socket.destroy(exhausted(performance.now()) ? connectError('CONNECT_TIMEOUT', 'Postgres did not answer a new connection') : undefined)
    }, policy.startupMs)
    socket.once('data', () => {
      spoke = true
      clearTimeout(watchdog)
      heard()
    })
    socket.on('data', () => void (lastHeard = performance.now()))
    // Registered before the wrapper's own close listener, so it runs first.
    socket.once('close', () => {
      clearTimeout(watchdog)
      if (spoke) return
      failingSince ??= started
      earlyCloses++
      if (exhausted(performance.now()) && wrapped) wrapped.failure = connectError('CONNECT_TIMEOUT', 'Postgres closes new connections without answering')
    })
    wrapped = new PgSocket(socket)
    return wrapped
  }
}

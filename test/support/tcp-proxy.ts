// A TCP forwarder in front of a shared service (NATS, Redis) so a test can cut a node's connection
// and restore it without touching the service other tests (and other people) are using.
import type { Socket } from 'bun'

export interface TcpProxy {
  port: number
  url(scheme: string): string
  /** Drops every open connection and refuses new ones until `restore`. */
  cut(): void
  /**
   * Drops every open connection and stops listening until `restore` (which listens again on the same
   * port): connection refused, as when nothing runs there (a server that is down).
   */
  refuse(): void
  restore(): void
  /** Keeps connections open but forwards nothing (a hung server or a silent network drop). */
  stall(): void
  /**
   * Drops every open connection; new ones are accepted and closed at once, without a byte (a server or
   * balancer that takes connections and drops them), until `restore`.
   */
  acceptAndClose(): void
  /** The next `n` new connections are accepted and held open in silence (nothing forwarded either way). */
  silenceNext(n: number): void
  /**
   * A silent partition: connections stay open, nothing is forwarded either way, and what was sent
   * meanwhile is held and delivered on `resume` (as TCP retransmits once a network heals).
   */
  pause(): void
  resume(): void
  close(): void
}

type Side = { pair: Pair; queue: Uint8Array[] }
type Pair = {
  client: Socket<Side>
  upstream: Socket<Side> | null
  early: Uint8Array[]
  /** Accepted but never connected upstream (silenceNext): the client hears nothing. */
  silent?: boolean
  /** Held while paused: toward the client, toward the upstream. */
  held: { down: Uint8Array[]; up: Uint8Array[] }
}

/** Writes all of `chunk`, keeping what the socket did not take for its `drain` event. */
function forward(to: Socket<Side>, chunk: Uint8Array) {
  const q = to.data.queue
  if (q.length > 0) return void q.push(chunk.slice())
  const n = to.write(chunk)
  if (n < chunk.byteLength) q.push(chunk.slice(Math.max(0, n)))
}

function drain(s: Socket<Side>) {
  const q = s.data.queue
  while (q.length > 0) {
    const chunk = q[0]!
    const n = s.write(chunk)
    if (n < chunk.byteLength) {
      q[0] = chunk.slice(Math.max(0, n))
      return
    }
    q.shift()
  }
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let open = true
  let stalled = false
  let silent = 0
  let paused = false
  const pairs = new Set<Pair>()
  const drop = (pair: Pair) => {
    if (!pairs.delete(pair)) return
    pair.client.end()
    pair.upstream?.end()
  }
  const listen = (port: number) =>
    Bun.listen<Side>({
      hostname: '127.0.0.1',
      port,
      socket: {
        open(client) {
          const pair: Pair = { client, upstream: null, early: [], held: { down: [], up: [] } }
          client.data = { pair, queue: [] }
          if (!open) return void client.end()
          pairs.add(pair)
          if (silent > 0) {
            silent--
            pair.silent = true // no upstream: the client hears nothing on this connection
            return
          }
          Bun.connect<Side>({
            hostname: targetHost,
            port: targetPort,
            data: { pair, queue: [] },
            socket: {
              open(upstream) {
                if (!pairs.has(pair)) return void upstream.end()
                pair.upstream = upstream
                for (const chunk of pair.early) forward(upstream, chunk)
                pair.early = []
              },
              data: (_, chunk) => {
                if (stalled) return
                if (paused) pair.held.down.push(chunk.slice())
                else forward(pair.client, chunk)
              },
              drain,
              close: () => drop(pair),
              error: () => drop(pair),
            },
          }).catch(() => drop(pair))
        },
        data(client, chunk) {
          const pair = client.data.pair
          if (stalled || pair.silent) return
          if (paused) pair.held.up.push(chunk.slice())
          else if (pair.upstream) forward(pair.upstream, chunk)
          else pair.early.push(chunk.slice())
        },
        drain,
        close: (client) => drop(client.data.pair),
        error: (client) => drop(client.data.pair),
      },
    })
  let server: ReturnType<typeof listen> | null = listen(0)
  const port = server.port
  return {
    port,
    url: (scheme) => `${scheme}://127.0.0.1:${port}`,
    cut() {
      open = false
      for (const pair of [...pairs]) drop(pair)
    },
    refuse() {
      open = false
      for (const pair of [...pairs]) drop(pair)
      server?.stop(true)
      server = null
    },
    restore() {
      open = true
      stalled = false
      server ??= listen(port)
    },
    stall() {
      stalled = true
    },
    acceptAndClose() {
      open = false
      for (const pair of [...pairs]) drop(pair)
    },
    silenceNext(n) {
      silent = n
    },
    pause() {
      paused = true
    },
    resume() {
      paused = false
      for (const pair of pairs) {
        for (const chunk of pair.held.down.splice(0)) forward(pair.client, chunk)
        const up = pair.held.up.splice(0)
        if (pair.upstream) for (const chunk of up) forward(pair.upstream, chunk)
        else pair.early.push(...up)
      }
    },
    close() {
      open = false
      for (const pair of [...pairs]) drop(pair)
      server?.stop(true)
      server = null
    },
  }
}

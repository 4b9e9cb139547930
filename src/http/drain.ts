// Graceful shutdown, step one: drain keep-alive connections before the listener closes. Bun's
// server.stop() closes idle keep-alive connections, and a client that writes its next request onto
// one at that moment gets a reset: a request lost in flight. So a stopping node first answers every
// request with `Connection: close` (clients and load balancers move to a fresh connection, which the
// node still accepts meanwhile; /readyz says 503) until no request came for a moment, then stops.
import type { Server } from 'bun'

const draining = new WeakMap<object, { lastRequestAt: number }>()
/** Servers ever put into draining: while none is, every request skips the map lookup. */
let drainingCount = 0

/** True while `server` drains; also notes that a request came. */
export function isDraining(server: object | null | undefined): boolean {
  if (drainingCount === 0) return false
  const d = server ? draining.get(server) : undefined
  if (!d) return false
  d.lastRequestAt = Date.now()
  return true
}

/** Drains until no request came for `quietMs`, at most `maxMs`. */
export async function drain(server: Server<unknown>, maxMs = 1_000, quietMs = 100): Promise<void> {
  const d = { lastRequestAt: Date.now() }
  if (!draining.has(server)) drainingCount++
  draining.set(server, d)
  const end = Date.now() + maxMs
  while (Date.now() < end && (Date.now() - d.lastRequestAt < quietMs || server.pendingRequests > 0)) await Bun.sleep(10)
}

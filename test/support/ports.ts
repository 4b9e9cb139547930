// The one way tests and benchmarks find a TCP port nothing listens on right now.

/** A free port on 127.0.0.1 (listened on and released at once). */
export function freePort(): number {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = probe.port
  probe.stop(true)
  return port
}

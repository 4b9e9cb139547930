// A private NATS server for tests that stop and restart NATS itself (the machine's shared server stays
// up for everyone else). Same port across restarts, so clients reconnect to it as to a restarted server.
import { freePort } from './ports'

export interface PrivateNats {
  url: string
  /** Stops the server (SIGTERM: it closes its client connections) and waits for the exit. */
  stop(): Promise<void>
  /** Starts it again on the same port and waits until it accepts connections. */
  start(): Promise<void>
}

const BIN = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server'


async function accepts(port: number): Promise<boolean> {
  try {
    const s = await Bun.connect({ hostname: '127.0.0.1', port, socket: { data() {} } })
    s.end()
    return true
  } catch {
    return false
  }
}

export async function startPrivateNats(): Promise<PrivateNats> {
  const port = await freePort()
  let proc: Bun.Subprocess | null = null
  const start = async () => {
    if (proc && proc.exitCode === null) return
    proc = Bun.spawn([BIN, '-a', '127.0.0.1', '-p', String(port)], { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' })
    const end = Date.now() + 10_000
    while (!(await accepts(port))) {
      if (Date.now() > end || proc.exitCode !== null) throw new Error(`nats-server did not start on port ${port}`)
      await Bun.sleep(20)
    }
  }
  await start()
  return {
    url: `nats://127.0.0.1:${port}`,
    async stop() {
      if (!proc || proc.exitCode !== null) return
      proc.kill('SIGTERM')
      const killer = setTimeout(() => proc?.kill('SIGKILL'), 5_000)
      await proc.exited
      clearTimeout(killer)
    },
    start,
  }
}

// `WORKERS=N bun run start`: N worker processes, each a full node, sharing one port through
// SO_REUSEPORT (the kernel spreads connections). Bun has no cluster module with a shared listener,
// and a single JS thread cannot use more than one core, so processes it is. The supervisor holds no
// state: it starts the workers, restarts one that dies, and forwards SIGTERM/SIGINT so each worker
// shuts down gracefully; it exits once all of them have.
import type { Config } from './config'

/** argv marker of a worker process (config still comes from the environment, as for any node). */
export const WORKER_FLAG = '--worker'

export function workerArgs(argv: string[] = process.argv): { isWorker: boolean; port: number | undefined } {
  const i = argv.indexOf(WORKER_FLAG)
  const port = i >= 0 ? Number(argv[i + 1]) : Number.NaN
  return { isWorker: i >= 0, port: Number.isInteger(port) ? port : undefined }
}

/** A free port when PORT=0, so every worker binds the same one. */
async function resolvePort(config: Config): Promise<number> {
  if (config.port !== 0) return config.port
  const probe = Bun.listen({ hostname: config.host, port: 0, socket: { data() {} } })
  const port = probe.port
  probe.stop(true)
  return port
}

export async function supervise(config: Config): Promise<never> {
  if (config.embedded) {
    console.error('WORKERS > 1 needs DATABASE_URL: the embedded database belongs to a single process.')
    process.exit(1)
  }
  const port = await resolvePort(config)
  const script = Bun.main
  const workers = new Map<number, Bun.Subprocess>()
  let stopping = false
  let exitCode = 0

  const spawn = (index: number, attempt = 0) => {
    const child = Bun.spawn([process.execPath, script, WORKER_FLAG, String(port)], {
      stdio: ['ignore', 'inherit', 'inherit'],
      onExit(_proc, code, signal) {
        workers.delete(index)
        if (stopping) {
          if (code !== 0 && code !== null) exitCode = code
          if (workers.size === 0) process.exit(exitCode)
          return
        }
        // A crashed worker comes back (with backoff); the others keep serving meanwhile.
        const delay = Math.min(30_000, 500 * 2 ** attempt)
        console.error(`Keyward worker ${index} exited (${signal ?? code}); restarting in ${delay} ms`)
        setTimeout(() => !stopping && spawn(index, attempt + 1), delay)
      },
    })
    workers.set(index, child)
    // A worker that stays up a minute has recovered: reset its backoff.
    setTimeout(() => workers.get(index) === child && (attempt = 0), 60_000).unref()
  }

  for (let i = 0; i < config.workers; i++) spawn(i)
  console.log(`Keyward supervisor: ${config.workers} workers sharing port ${port} (pid ${process.pid})`)

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return
      stopping = true
      if (workers.size === 0) process.exit(0)
      for (const w of workers.values()) w.kill('SIGTERM')
      // Workers bound their own shutdown; this is the backstop for one that hangs anyway.
      setTimeout(() => {
        for (const w of workers.values()) w.kill('SIGKILL')
        process.exit(1)
      }, config.shutdownTimeoutMs + 5_000).unref()
    })
  }
  return new Promise<never>(() => {})
}

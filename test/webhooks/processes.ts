// Real server processes (`bun src/main.ts`) for restart and multi-node tests.
import { join } from 'node:path'
import { ADMIN_TOKEN, SECRET_KEY } from '../support/harness'

const ROOT = join(import.meta.dir, '..', '..')

export interface ServerProcess {
  url: string
  /** SIGTERM and wait for a clean exit (the node finishes or releases its attempts in flight). */
  stop(): Promise<number>
}

export async function spawnServer(env: Record<string, string | undefined>): Promise<ServerProcess> {
  const proc = Bun.spawn(['bun', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ADMIN_TOKEN,
      SECRET_KEY,
      PORT: '0',
      HOST: '127.0.0.1',
      DEMO_ACCOUNT: 'false',
      LOG_LEVEL: 'warn',
      NATS_URL: process.env.NATS_URL,
      REDIS_URL: process.env.REDIS_URL,
      ...env,
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let output = ''
  const listening = new Promise<string>((resolve, reject) => {
    const decoder = new TextDecoder()
    const drain = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream) {
        output += decoder.decode(chunk)
        const m = /Keyward listening on (http:\/\/[0-9.]+:\d+)/.exec(output)
        if (m) resolve(m[1])
      }
    }
    void drain(proc.stdout)
    void drain(proc.stderr)
    void proc.exited.then((code) => reject(new Error(`server exited (${code}) before listening:\n${output.slice(-2000)}`)))
    setTimeout(() => reject(new Error(`server did not start in time:\n${output.slice(-2000)}`)), 60_000)
  })
  let url: string
  try {
    url = await listening
  } catch (err) {
    proc.kill('SIGKILL')
    throw err
  }
  return {
    url,
    async stop() {
      proc.kill('SIGTERM')
      return proc.exited
    },
  }
}

export { freePort } from '../support/ports'

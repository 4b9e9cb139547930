// What the benchmark programs need to run servers in processes of their own: a free port, a wait
// until a server answers, and a node process.
import { spawn } from 'bun'
import { join } from 'node:path'
import { ADMIN_TOKEN } from './fixture'

import { freePort } from '../support/ports'
import { waitForUrl } from '../support/wait'

// The test support's own, under the names the benchmarks use.
export { freePort, waitForUrl as waitFor }

/**
 * A node process as `bun run start` runs it (embedded, or on `dbUrl`; never NATS or Redis: one node),
 * started on a free port; resolves once it answers. The caller kills `proc`.
 */
export async function startBenchNode(opts: { dataDir: string; dbUrl?: string | null; secretKey: string; logLevel: string }) {
  const port = await freePort()
  const env = { ...process.env } as Record<string, string>
  delete env.NATS_URL
  delete env.REDIS_URL
  const proc = spawn(['bun', join(import.meta.dir, '..', '..', 'src/main.ts')], {
    env: {
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_TOKEN,
      SECRET_KEY: opts.secretKey,
      LOG_LEVEL: opts.logLevel,
      DEMO_ACCOUNT: 'false',
      DATA_DIR: opts.dataDir,
      ...(opts.dbUrl ? { DATABASE_URL: opts.dbUrl } : {}),
    },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${port}`
  await waitForUrl(`${url}/healthz`)
  return { url, proc }
}

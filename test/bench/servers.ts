// What the benchmark programs need to run servers in processes of their own: a free port, a wait
// until a server answers, and a node process.
import { spawn } from 'bun'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { createDatabaseOn } from '../support/harness'
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

/**
 * A node in this process, for benchmarks that call its handlers directly: on a fresh database of
 * DATABASE_URL's server when it is set (else embedded), its access log written to /dev/null (it is
 * part of the stack), `env` on top. `stop` ends it and removes its database and data folder.
 */
export async function startInProcessNode(name: string, env: Record<string, string> = {}): Promise<{ node: Node; stop(): Promise<void> }> {
  const db = process.env.DATABASE_URL ? await createDatabaseOn(process.env.DATABASE_URL, 'keyward_bench') : null
  const dataDir = mkdtempSync(join(tmpdir(), `keyward-bench-${name}-`))
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    DEMO_ACCOUNT: 'false',
    ADMIN_TOKEN,
    SECRET_KEY: 'ab'.repeat(32),
    DATA_DIR: dataDir,
    ...(db ? { DATABASE_URL: db.url } : {}),
    ...env,
  })
  const node = await startNode(config, { log: createLogger(config.logLevel, '/dev/null') })
  return {
    node,
    async stop() {
      await node.stop()
      await db?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

// The operator CLI as a subprocess (`bun run keyward …`), on its own store: a fresh real-Postgres
// database when DATABASE_URL is set, a temp DATA_DIR otherwise. Call at the top of a test file.
import { afterAll, beforeAll } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { freshDatabase, realPostgres, SECRET_KEY, testConfig, type TestDb } from './harness'
import { embeddedEnv } from './helpers'

const ROOT = join(import.meta.dir, '..', '..')

export interface Cli {
  /** Runs `bun run keyward …args` on the store. */
  keyward(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>
  /** A server on the same store (stop it when done). */
  startNode(): Promise<Node>
}

export function useCli(tmpPrefix: string): Cli {
  const dataDir = mkdtempSync(join(tmpdir(), tmpPrefix))
  let db: TestDb | null = null
  let env: Record<string, string>
  beforeAll(async () => {
    if (realPostgres) {
      db = await freshDatabase()
      env = embeddedEnv({ DATABASE_URL: db.url!, SECRET_KEY })
    } else {
      env = embeddedEnv({ DATA_DIR: dataDir })
    }
  }, 60_000)
  afterAll(async () => {
    await db?.drop()
    rmSync(dataDir, { recursive: true, force: true })
  })
  return {
    async keyward(...args) {
      const proc = Bun.spawn(['bun', 'run', 'keyward', ...args], { cwd: ROOT, env, stdout: 'pipe', stderr: 'pipe' })
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
      return { code, stdout, stderr }
    },
    startNode: () => startNode(testConfig({ DATA_DIR: dataDir }, db?.url ?? null), { log: createLogger('silent') }),
  }
}

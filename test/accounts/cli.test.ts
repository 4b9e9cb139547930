// `bun run keyward …` as a subprocess: against a fresh real-Postgres database when DATABASE_URL is set,
// a temp DATA_DIR otherwise. `accounts create` prints an account id and a token that works.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger } from '../../src/infra/log'
import { startNode } from '../../src/node'
import { client, freshDatabase, realPostgres, SECRET_KEY, testConfig, type TestDb } from '../support/harness'
import { embeddedEnv } from '../support/helpers'

setDefaultTimeout(120_000)

const ROOT = join(import.meta.dir, '..', '..')
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-cli-'))
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

async function keyward(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(['bun', 'run', 'keyward', ...args], { cwd: ROOT, env, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

test('accounts create prints an account id and a working full_access token', async () => {
  const created = await keyward('accounts', 'create', '--name', 'Acme Corp', '--plan', 'growth')
  if (created.code !== 0) throw new Error(`exit ${created.code}: ${created.stdout}${created.stderr}`)
  const accountId = /account_id: (acct_[0-9A-HJKMNP-TV-Z]{26})/.exec(created.stdout)?.[1]
  const token = /token: (kw_[A-Za-z0-9]{32})/.exec(created.stdout)?.[1]
  expect(accountId).toBeDefined()
  expect(token).toBeDefined()
  expect(created.stdout).toContain('plan: growth')

  // a server on the same store accepts the token for that account
  const config = testConfig({ DATA_DIR: dataDir }, db?.url ?? null)
  const node = await startNode(config, { log: createLogger('silent') })
  try {
    const call = client(node.url)
    const ping = await call('GET', '/v1/ping', { token })
    expect(ping.status).toBe(200)
    expect(ping.body).toEqual({ status: 'ok', accountId })
    const keys = await call('GET', '/v1/api-keys', { token })
    expect(keys.body.data).toEqual([expect.objectContaining({ scope: 'full_access' })])
    // growth: no product limit
    for (let i = 0; i < 2; i++) expect((await call('POST', '/v1/products', { token, body: { name: `P${i}`, slug: `p${i}` } })).status).toBe(201)
  } finally {
    await node.stop()
  }
})

test('bad arguments exit 2 with a message and print no token', async () => {
  const noName = await keyward('accounts', 'create', '--plan', 'growth')
  expect(noName.code).toBe(2)
  expect(noName.stderr).toContain('--name')
  const badPlan = await keyward('accounts', 'create', '--name', 'X', '--plan', 'platinum')
  expect(badPlan.code).toBe(2)
  expect(badPlan.stderr).toContain('--plan')
  const unknown = await keyward('frobnicate')
  expect(unknown.code).toBe(2)
  expect(unknown.stderr).toContain('Usage')
  expect(noName.stdout + badPlan.stdout).not.toMatch(/kw_/)
})

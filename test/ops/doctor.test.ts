// `bun run keyward doctor` (docs/operations.md, "Doctor") against the real services: a sound
// installation is all ok; each usual mistake turns its own line to warn or fail with a fix; the exit
// status is 1 on a fail and 0 when there are only warnings.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SMTPServer } from 'smtp-server'
import { connectPostgres } from '../../src/infra/db'
import { seal } from '../../src/infra/crypto'
import { migrate } from '../../src/infra/migrate'
import { adminTokenWeakness, runDoctor, type Finding } from '../../src/modules/ops/doctor'
import { createLogger } from '../../src/infra/log'
import { startNode } from '../../src/node'
import { createDatabaseOn, testConfig } from '../support/harness'
import { requireEnvironment } from '../support/environment'
import { embeddedEnv } from '../support/helpers'

setDefaultTimeout(120_000)
const ROOT = join(import.meta.dir, '..', '..')
await requireEnvironment('test/ops/doctor.test.ts', ['postgres', 'nats', 'redis'])

const KEY_A = 'a1'.repeat(32)
const KEY_B = 'b2'.repeat(32)
const STRONG = 'Zx8-kP2q_Wm4tR7vN1bY6cH3jL9sD5fG'
let db: { url: string; drop(): Promise<void> }
let smtp: SMTPServer
let smtpPort: number
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-doctor-'))

/** A port nothing listens on. */
function closedPort() {
  const s = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = s.port
  s.stop(true)
  return port
}

beforeAll(async () => {
  db = await createDatabaseOn(process.env.DATABASE_URL!, 'keyward_doctor')
  const pg = connectPostgres(db.url, 1)
  try {
    await migrate(pg.sql)
    // A webhook secret sealed with KEY_A, on a plain-http endpoint.
    await pg.sql`insert into accounts (id, name, plan) values ('acct_doctor', 'Doctor', 'growth')`
    await pg.sql`insert into webhooks (id, account_id, url, events, secret_sealed)
      values ('wh_doctor', 'acct_doctor', 'http://hooks.example.com/in', '{key.created}', ${seal(Buffer.from(KEY_A, 'hex'), 'whsec_test')})`
  } finally {
    await pg.close()
  }
  smtp = new SMTPServer({ authOptional: true, disabledCommands: ['STARTTLS'], onData: (s, _session, cb) => s.on('end', cb).resume() })
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
  smtpPort = (smtp.server.address() as { port: number }).port
})
afterAll(async () => {
  await new Promise<void>((resolve) => smtp?.close(() => resolve()))
  await db?.drop()
  rmSync(dataDir, { recursive: true, force: true })
})

const sound = () => ({
  DATABASE_URL: db.url,
  SECRET_KEY: KEY_A,
  NATS_URL: process.env.NATS_URL,
  REDIS_URL: process.env.REDIS_URL,
  ADMIN_TOKEN: STRONG,
  SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
  MAIL_FROM: 'Licenses <licenses@example.com>',
})
const line = (found: Finding[], check: string) => {
  const f = found.find((x) => x.check === check)
  if (!f) throw new Error(`no line for ${check}: ${JSON.stringify(found)}`)
  return f
}

test('a sound installation: every line ok but the plain-http webhook (warn, with its fix)', async () => {
  const found = await runDoctor(sound())
  const byCheck = Object.fromEntries(found.map((f) => [f.check, f.status]))
  expect(byCheck).toEqual({
    configuration: 'ok',
    SECRET_KEY: 'ok',
    ADMIN_TOKEN: 'ok',
    Postgres: 'ok',
    clock: 'ok',
    migrations: 'ok',
    'SECRET_KEY stable': 'ok',
    webhooks: 'warn',
    'public URL': 'ok',
    SMTP: 'ok',
    NATS: 'ok',
    Redis: 'ok',
  })
  expect(line(found, 'Postgres').detail).toMatch(/PostgreSQL \d+/)
  expect(line(found, 'NATS').detail).toMatch(/server \d+\.\d+/)
  expect(line(found, 'Redis').detail).toMatch(/version \d+\.\d+/)
  expect(line(found, 'SECRET_KEY stable').detail).toContain('a webhook secret')
  expect(line(found, 'webhooks')).toMatchObject({ detail: expect.stringContaining('1 of 1'), fix: expect.stringContaining('https://') })
  // No secret is printed.
  const text = JSON.stringify(found)
  for (const secret of [KEY_A, STRONG]) expect(text).not.toContain(secret)
})

test('each usual mistake fails or warns on its own line, with a fix', async () => {
  // Another SECRET_KEY than the one that sealed the stored values.
  expect(line(await runDoctor({ ...sound(), SECRET_KEY: KEY_B }), 'SECRET_KEY stable')).toMatchObject({ status: 'fail', fix: expect.stringContaining('put back') })
  // A weak operator token.
  expect(line(await runDoctor({ ...sound(), ADMIN_TOKEN: 'adminadminadmin1' }), 'ADMIN_TOKEN')).toMatchObject({ status: 'warn', fix: expect.stringContaining('openssl rand') })
  expect(adminTokenWeakness('a'.repeat(40))).toContain('few distinct')
  expect(adminTokenWeakness(STRONG)).toBeNull()
  // Services that do not answer.
  const down = await runDoctor({ ...sound(), REDIS_URL: `redis://127.0.0.1:${closedPort()}`, NATS_URL: `nats://127.0.0.1:${closedPort()}`, SMTP_URL: `smtp://127.0.0.1:${closedPort()}` }, { timeoutMs: 2_000 })
  for (const check of ['Redis', 'NATS', 'SMTP']) expect(line(down, check)).toMatchObject({ status: 'fail', fix: expect.any(String) })
  const noPg = await runDoctor({ ...sound(), DATABASE_URL: `postgres://postgres@127.0.0.1:${closedPort()}/x` }, { timeoutMs: 2_000 })
  expect(line(noPg, 'Postgres')).toMatchObject({ status: 'fail', fix: expect.stringContaining('DATABASE_URL') })
  // A clock ahead of Postgres's: warn past 1 s, fail past 30 s.
  expect(line(await runDoctor(sound(), { now: () => Date.now() + 5_000 }), 'clock').status).toBe('warn')
  const far = line(await runDoctor(sound(), { now: () => Date.now() + 120_000 }), 'clock')
  expect(far).toMatchObject({ status: 'fail', fix: expect.stringContaining('NTP') })
  expect(far.detail).toMatch(/ahead of Postgres/)
  // A configuration that does not load: one line, and nothing else is tried.
  const bad = await runDoctor({ DATABASE_URL: db.url })
  expect(bad).toEqual([{ check: 'configuration', status: 'fail', detail: expect.stringContaining('SECRET_KEY is required'), fix: expect.any(String) }])
})

test('PUBLIC_URL: plain http is said; an address where no Keyward answers fails', async () => {
  const node = await startNode(testConfig({}, db.url), { log: createLogger('silent') })
  try {
    const http = line(await runDoctor({ ...sound(), PUBLIC_URL: node.url }), 'public URL')
    expect(http).toMatchObject({ status: 'warn', detail: expect.stringContaining('plain http'), fix: expect.stringContaining('TLS') })
    const nothing = line(await runDoctor({ ...sound(), PUBLIC_URL: `http://127.0.0.1:${closedPort()}` }, { timeoutMs: 2_000 }), 'public URL')
    expect(nothing.status).toBe('fail')
  } finally {
    await node.stop()
  }
})

test('the command: warnings alone exit 0, a fail exits 1; every line reads ok / warn / fail', async () => {
  const run = async (env: Record<string, string>) => {
    const proc = Bun.spawn(['bun', 'run', 'keyward', 'doctor'], { cwd: ROOT, env: embeddedEnv(env), stdout: 'pipe', stderr: 'pipe' })
    const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
    return { stdout, code }
  }
  // A fresh embedded store: its generated SECRET_KEY and single node are warnings, not failures.
  const warnOnly = await run({ DATA_DIR: dataDir })
  expect(warnOnly.stdout).toMatch(/^warn {2}SECRET_KEY: /m)
  expect(warnOnly.stdout).toMatch(/^ok {4}Postgres: embedded store/m)
  expect(warnOnly.stdout).toContain('0 fail')
  expect(warnOnly.code).toBe(0)
  const failing = await run({ DATA_DIR: dataDir, REDIS_URL: `redis://127.0.0.1:${closedPort()}` })
  expect(failing.stdout).toMatch(/^fail {2}Redis: not reachable/m)
  expect(failing.stdout).toMatch(/^ {6}fix: check REDIS_URL/m)
  expect(failing.code).toBe(1)
  for (const l of failing.stdout.split('\n').filter((l) => l && !l.startsWith(' ') && !l.startsWith('#') && !l.startsWith('$'))) expect(l).toMatch(/^(ok|warn|fail) /)
})

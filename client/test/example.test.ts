// The example app (examples/licensed-cli) run by Node as a vendor would ship it, against the fake
// signing server: activate, list devices, work offline (grace, then an offline license), release this
// device, and exit when the heartbeat loses the seat.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startFakeServer, type FakeServer } from './support/fake-server'

setDefaultTimeout(120_000)
const ROOT = join(import.meta.dir, '..')
const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'

let fake: FakeServer
let app: string
beforeAll(() => {
  const built = Bun.spawnSync([join(ROOT, '..', 'node_modules', '.bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')])
  if (built.exitCode !== 0) throw new Error(`client build failed: ${built.stdout}`)
  fake = startFakeServer()
  // What `npm install` would give the vendor: the app beside node_modules/@keyward/client.
  app = mkdtempSync(join(tmpdir(), 'licensed-cli-'))
  copyFileSync(join(ROOT, '..', 'examples', 'licensed-cli', 'licensed-cli.mjs'), join(app, 'licensed-cli.mjs'))
  mkdirSync(join(app, 'node_modules', '@keyward'), { recursive: true })
  symlinkSync(ROOT, join(app, 'node_modules', '@keyward', 'client'))
})
afterAll(async () => {
  await fake.stop()
  rmSync(app, { recursive: true, force: true })
})

async function cli(...args: string[]) {
  const proc = Bun.spawn(['node', join(app, 'licensed-cli.mjs'), ...args], {
    env: {
      PATH: process.env.PATH!,
      KEYWARD_URL: fake.url,
      KEYWARD_TOKEN: 'kw_test',
      KEYWARD_PUBLIC_KEY: fake.publicKeyRaw,
      KEYWARD_PRODUCT_ID: 'prod_cli',
      LICENSED_CLI_HOME: join(app, 'home'),
      HEARTBEAT_SECONDS: '0.05',
      USER: 'alice',
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { out: out + err, code }
}

test('activate, devices, offline grace, offline license, release, and a lost seat ends the run', async () => {
  const activated = await cli('activate', KEY)
  expect(activated).toEqual({ out: 'licensed: plan pro, 1/3 devices\n', code: 0 })
  const fp = (await cli('fingerprint')).out.trim()
  expect(fp).toMatch(/^[0-9a-f]{64}$/)
  expect(fake.requests[0].body).toMatchObject({ key: KEY, device_fingerprint: fp, device_name: "alice's computer", product_id: 'prod_cli' })

  const devices = await cli('devices')
  expect(devices.code).toBe(0)
  expect(devices.out).toContain(`* ${fp.slice(0, 12)}…  alice's computer`)

  // The service is down for the start (every retry of the first check): grace lets the app run; at the
  // next heartbeat the service is back and says the key was revoked: the seat is lost, the app exits.
  fake.script = ['down', 'down', 'down', 'down']
  fake.validateAnswer = { valid: false, reason: 'revoked' }
  const offline = await cli('run')
  expect(offline.out).toContain('licensed (offline, last confirmed')
  expect(offline.out).toContain('Hello from the licensed app.')
  expect(offline.code).toBe(2)
  expect(offline.out).toContain('license lost: revoked')

  const now = Date.now()
  const file = join(app, 'offline.lic')
  writeFileSync(file, fake.license({ v: 1, id: 'lic_1', account_id: 'acct_1', key_id: 'key_1', product_id: 'prod_cli', plan: 'pro', device_fingerprint: fp, issued_at: new Date(now).toISOString(), expires_at: new Date(now + 86_400_000).toISOString() }))
  const lic = await cli('offline', file)
  expect(lic).toEqual({ out: `licensed offline until ${new Date(now + 86_400_000).toISOString()} (plan pro)\n`, code: 0 })
  writeFileSync(file, fake.license({ v: 1, id: 'lic_2', account_id: 'acct_1', key_id: 'key_1', product_id: 'prod_cli', plan: 'pro', device_fingerprint: 'f'.repeat(64), issued_at: new Date(now).toISOString(), expires_at: new Date(now + 86_400_000).toISOString() }))
  expect(await cli('offline', file)).toEqual({ out: 'offline license refused: wrong_device\n', code: 1 })

  expect(await cli('activate', KEY)).toEqual({ out: 'this key was revoked: contact support\n', code: 1 })
  fake.validateAnswer = { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 }
  expect(await cli('release', 'this')).toEqual({ out: 'released: 0/3 devices in use\n', code: 0 })
})

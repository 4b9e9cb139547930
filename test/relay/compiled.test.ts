// The one executable: `bun run build:relay` (built once here, into a temp folder), started with no
// Postgres, NATS or Redis in its environment, on its own data folder: request, load, serve, a leased
// seat and a signed answer, and its page.
import { afterAll, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { issueRelayLicense, KEY_VALUE, startRelay, tempDir, testAccount, writeTemp, type RunningRelay } from '../support/relay'

const dir = tempDir('relay-compiled-')
const bin = join(dir, 'keyward-relay')
let relay: RunningRelay | null = null
afterAll(async () => {
  await relay?.stop('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

test('keyward-relay builds, starts on its own data folder and answers', async () => {
  const build = Bun.spawn(['bun', 'build', '--compile', '--minify', 'src/relay-main.ts', '--outfile', bin], { cwd: join(import.meta.dir, '..', '..'), stdout: 'pipe', stderr: 'pipe' })
  expect(await build.exited).toBe(0)
  expect(statSync(bin).size).toBeGreaterThan(1_000_000)
  const exec = async (args: string[], env: Record<string, string>) => {
    const proc = Bun.spawn([bin, ...args], { env: { PATH: '/usr/bin:/bin', ...env }, stdout: 'pipe', stderr: 'pipe' })
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
    return { stdout, stderr, code }
  }
  const data = join(dir, 'data')
  const env = { KEYWARD_MACHINE_ID: 'machine-compiled' }
  const request = await exec(['request', '--data', data], env)
  expect(request.code).toBe(0)
  const account = testAccount()
  const license = issueRelayLicense(account, request.stdout.trim(), { seats: 1 })
  const loaded = await exec(['load', writeTemp(dir, 'relay.lic', license.file), '--data', data, '--key', KEY_VALUE, '--root', account.root.publicKeyB64], env)
  expect(loaded.stderr).toBe('')
  expect(loaded.code).toBe(0)
  // startRelay runs `<bin> relay serve …`: the executable takes the mode's name as an optional first word
  relay = await startRelay(data, env, [bin])
  expect(relay.adminToken).not.toBeNull()
  const fp = createHash('sha256').update('compiled').digest('hex')
  const res = await fetch(relay.url + '/v1/validate', { method: 'POST', headers: { 'keyward-nonce': 'compiled-nonce-000001' }, body: JSON.stringify({ key: KEY_VALUE, device_fingerprint: fp }) })
  expect(await res.json()).toMatchObject({ valid: true, activation_limit: 1, activations_used: 1 })
  expect(res.headers.get('keyward-signature')).toContain(`kid=${license.relayId}`)
  expect(res.headers.get('keyward-certificate')).toBe(license.relayCertificate)
  const page = await fetch(relay.url + '/')
  const html = await page.text()
  const script = /src="([^"]+\.js)"/.exec(html)?.[1]
  expect(script).toBeDefined()
  expect((await fetch(relay.url + script!)).status).toBe(200)
})

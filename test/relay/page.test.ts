// The relay's page in a real Chromium against a running relay: signed out it asks for the admin token
// (a wrong one is told in words), then shows the license, the leases (device, since, until) with a
// release button that frees the seat (read back through /v1/devices), the request code for a renewal,
// and installs a renewed license pasted in. Nothing is fetched from another origin. Screenshots at 1280
// and 390 px, light and dark (test-output/console/relay-*.png; copies in docs/console-screenshots/).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import { requireChromium } from '../support/environment'
import { issueRelayLicense, KEY_VALUE, relayCli, startRelay, tempDir, testAccount, writeTemp, type RunningRelay } from '../support/relay'
import { openConsole, type Console } from '../console/browser'

const present = await requireChromium('relay/page')
const FP = (n: number) => createHash('sha256').update(`page-device-${n}`).digest('hex')
const data = tempDir('relay-page-')
const env = { KEYWARD_MACHINE_ID: 'machine-page', UPSTREAM_URL: 'http://127.0.0.1:9' } // an upstream that never answers: offline
const account = testAccount()
let relay: RunningRelay
let c: Console
let code: string

beforeAll(async () => {
  if (!present) return
  code = (await relayCli(['request', '--data', data, '--name', 'Lab 4 relay'], env)).stdout.trim()
  const license = issueRelayLicense(account, code, { seats: 5, leaseSeconds: 900, keyExpiresAt: '2027-06-30T00:00:00.000Z' })
  await relayCli(['load', writeTemp(data, 'l.lic', license.file), '--data', data, '--key', KEY_VALUE, '--root', account.root.publicKeyB64], env)
  relay = await startRelay(data, env)
  const names = ['CAD station 1', 'CAD station 2', "Maria's laptop"]
  for (const [i, device_name] of names.entries()) {
    await fetch(relay.url + '/v1/validate', { method: 'POST', body: JSON.stringify({ key: KEY_VALUE, device_fingerprint: FP(i), device_name }) })
  }
  c = await openConsole(relay.url)
}, 90_000)
afterAll(async () => {
  await c?.close()
  await relay?.stop('SIGKILL')
  rmSync(data, { recursive: true, force: true })
})

const devices = async () => (await (await fetch(relay.url + '/v1/devices', { method: 'POST', body: JSON.stringify({ key: KEY_VALUE }) })).json()) as any

test.if(present)('sign in, see the license and leases, release a seat, install a renewal', async () => {
  const p = c.page
  await p.goto(relay.url + '/')
  await p.getByLabel('Admin token').fill('not-the-token')
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByText("That is not this relay's admin token.").waitFor()
  await c.shoot('relay-signin')
  await p.getByLabel('Admin token').fill(relay.adminToken!)
  await p.getByRole('button', { name: 'Sign in' }).click()
  await p.getByRole('heading', { name: 'Leases' }).waitFor()
  await c.settled()
  const body = await p.locator('main').innerText()
  expect(body).toContain('RE1AY…')
  expect(body).toContain('CAD station 1')
  expect(body).toContain("Maria's laptop")
  expect(await p.locator('#request-code').innerText()).toBe(code)
  await c.shoot('relay')

  await p.getByRole('button', { name: 'Release CAD station 2' }).click()
  await p.getByText('Seat released.').waitFor()
  expect((await devices()).devices.map((d: any) => d.device_name)).toEqual(['CAD station 1', "Maria's laptop"])
  expect(await p.locator('main').innerText()).not.toContain('CAD station 2')

  // a renewal pasted in: more seats
  await p.getByLabel('Relay license').fill(issueRelayLicense(account, code, { seats: 8, relayId: JSON.parse(await (await fetch(relay.url + '/relay/api/state', { headers: { authorization: `Bearer ${relay.adminToken}` } })).text()).license.relay_id }).text)
  await p.getByRole('button', { name: 'Install license' }).click()
  await p.getByText('License installed.').waitFor()
  expect((await devices()).activation_limit).toBe(8)
  // a license for another relay is refused in words, and changes nothing
  const other = (await relayCli(['request', '--data', tempDir('relay-page-other-')], env)).stdout.trim()
  await p.getByLabel('Relay license').fill(issueRelayLicense(account, other).text)
  await p.getByRole('button', { name: 'Install license' }).click()
  await p.getByText("another relay's key pair").waitFor()
  expect((await devices()).activation_limit).toBe(8)
  await c.shoot('relay-refused')

  // the wrong token's 401 and the refused license's 400 are the answers the page shows in words
  expect(c.errors.filter((e) => !/status of (400|401)/.test(e))).toEqual([])
  expect(c.requests.every((u) => u.startsWith(relay.url) || u.startsWith('data:'))).toBe(true)
})

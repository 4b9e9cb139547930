// The example app (examples/licensed-cli) run by Node as a vendor ships it, as a user runs it (a child
// process per command, configured through its environment), against a real Keyward node started here,
// reached through a TCP proxy (test/support/tcp-proxy.ts) that can make the node unreachable: activate
// (the node's signed answer verified by the SDK inside the app), run, list devices, release a device
// and the 409 past the key's deactivations_allowed, grace while the node is down, a key revoked through
// the management API ending a running app and refusing the next start, a full device list, a retired
// token, offline licenses the node issued. Forged answers (an impostor server with its own key, a genuine
// answer altered on the way) are refused.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fingerprint as randomFingerprint, newKey, useHarness } from '../support/harness'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { until } from '../validation/support'
import { Keyward, memoryStorage } from '../../client/src/index.ts'
import { startFakeServer, type FakeServer } from '../../client/test/support/fake-server'
import { graceSlot } from '../../client/test/support/grace-slot'
import { vendorOn } from './vendor'

setDefaultTimeout(120_000)
const h = useHarness()
const ROOT = join(import.meta.dir, '..', '..', 'client')
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

let token: string
let validateToken: string
let productId: string
let publicKey: string
let proxy: TcpProxy
let app: string
let homes = 0
beforeAll(async () => {
  const built = Bun.spawnSync([join(ROOT, '..', 'node_modules', '.bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')])
  if (built.exitCode !== 0) throw new Error(`client build failed: ${built.stdout}`)
  // What `npm install` would give the vendor: the app beside node_modules/@keyward/client.
  app = mkdtempSync(join(tmpdir(), 'licensed-cli-'))
  copyFileSync(join(ROOT, '..', 'examples', 'licensed-cli', 'licensed-cli.mjs'), join(app, 'licensed-cli.mjs'))
  mkdirSync(join(app, 'node_modules', '@keyward'), { recursive: true })
  symlinkSync(ROOT, join(app, 'node_modules', '@keyward', 'client'))

  // The vendor's side: an account, a product, a `validate` token and the public key built into the app.
  const vendor = await vendorOn(h)
  ;({ token, validateToken, productId } = vendor)
  publicKey = vendor.publicKey.raw
  const node = new URL(h.node.url)
  proxy = await startTcpProxy(node.hostname, Number(node.port))
})
const spawned = new Set<Bun.Subprocess>()
afterAll(() => {
  for (const proc of spawned) proc.kill() // an app left running by a failed test
  proxy?.close()
  if (app) rmSync(app, { recursive: true, force: true })
})

type Env = Record<string, string>

/** One user's installation: its own state directory (LICENSED_CLI_HOME), the node through the proxy. */
function install(extra: Env = {}) {
  const home = join(app, `home-${++homes}`)
  const env: Env = {
    PATH: process.env.PATH!,
    KEYWARD_URL: proxy.url('http'),
    KEYWARD_TOKEN: validateToken,
    KEYWARD_PUBLIC_KEY: publicKey,
    KEYWARD_PRODUCT_ID: productId,
    LICENSED_CLI_HOME: home,
    USER: 'alice',
    ...extra,
  }
  return { home, env, cli: (...args: string[]) => cli(env, ...args), start: (args: string[], more: Env = {}) => start({ ...env, ...more }, ...args) }
}

/** A running `licensed-cli` process: its output so far, and its exit. */
function start(env: Env, ...args: string[]) {
  const proc = Bun.spawn(['node', join(app, 'licensed-cli.mjs'), ...args], { env, stdout: 'pipe', stderr: 'pipe' })
  spawned.add(proc)
  void proc.exited.then(() => spawned.delete(proc))
  const seen = { stdout: '', stderr: '' }
  const read = async (stream: ReadableStream<Uint8Array>, into: 'stdout' | 'stderr') => {
    const decoder = new TextDecoder()
    const reader = stream.getReader()
    for (let r = await reader.read(); !r.done; r = await reader.read()) seen[into] += decoder.decode(r.value, { stream: true })
  }
  const done = Promise.all([read(proc.stdout, 'stdout'), read(proc.stderr, 'stderr'), proc.exited]).then(() => ({ ...seen, code: proc.exitCode }))
  return {
    proc,
    seen,
    /** Resolves once stdout contains `text` (fails if the process ends first). */
    async stdoutHas(text: string) {
      await until(async () => seen.stdout.includes(text) || proc.exitCode !== null, Boolean, 60_000)
      if (!seen.stdout.includes(text)) throw new Error(`no "${text}" in ${JSON.stringify(seen)} (exit ${proc.exitCode})`)
    },
    done,
  }
}

/** Runs one command to its end. */
const cli = (env: Env, ...args: string[]) => start(env, ...args).done

const key = (extra: Record<string, unknown> = {}) =>
  newKey(h.call, token, productId, { plan: 'pro', ...extra }) as Promise<{ id: string; key_value: string }>
const keyDetail = async (id: string) => (await h.call('GET', `/v1/keys/${id}`, { token })).body
/** Another computer of the same user, through the SDK. */
const otherDevice = (keyValue: string, deviceName: string, fingerprint = randomFingerprint()) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey, productId, storage: memoryStorage(), retries: 0, fingerprint }).validate({ key: keyValue, deviceName })
const quit = async (run: ReturnType<typeof start>) => {
  run.proc.kill('SIGINT')
  return run.done
}

test('activate, run, devices, release another device, and the 409 once the releases are used up', async () => {
  const k = await key({ activation_limit: 3, deactivations_allowed: 1 })
  const user = install()
  const fp = (await user.cli('fingerprint')).stdout.trim()
  expect(fp).toMatch(/^[0-9a-f]{64}$/)

  // A typo: the node says not_found; nothing is remembered.
  expect(await user.cli('activate', 'ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ')).toEqual({ stdout: '', stderr: 'this key does not exist: check for typos\n', code: 1 })
  expect(existsSync(join(user.home, 'key'))).toBe(false)

  expect(await user.cli('activate', k.key_value)).toEqual({ stdout: 'licensed: plan pro, 1/3 devices\n', stderr: '', code: 0 })
  expect(readFileSync(join(user.home, 'key'), 'utf8')).toBe(k.key_value)
  // The node holds this device's seat, with the name and version the app sent.
  let detail = await keyDetail(k.id)
  expect(detail.activations).toHaveLength(1)
  expect(detail.activations[0]).toMatchObject({ device_fingerprint: fp, device_name: "alice's computer", app_version: '1.0.0', status: 'active' })
  // The grace answer kept on disk is the node's signed answer.
  const state = JSON.parse(readFileSync(join(user.home, 'state.json'), 'utf8'))
  expect(JSON.parse(JSON.parse(state[graceSlot(k.key_value, productId)]).body)).toEqual({
    valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3, policy_id: null, entitlements: {}, expired: false, grace_until: null, credits_remaining: null,
  })

  // The app runs while licensed, until the user quits it.
  const run = user.start(['run'])
  await run.stdoutHas('Hello from the licensed app.')
  expect(await quit(run)).toEqual({ stdout: 'licensed: plan pro, 1/3 devices\nHello from the licensed app. (Ctrl-C to quit)\n', stderr: '', code: 0 })

  // The user's laptop takes a second seat; the devices screen shows both, this one marked.
  const laptop = randomFingerprint()
  expect(await otherDevice(k.key_value, "alice's laptop", laptop)).toMatchObject({ valid: true, activationsUsed: 2 })
  const devices = await user.cli('devices')
  expect(devices.code).toBe(0)
  expect(devices.stderr).toBe('')
  const lines = devices.stdout.trimEnd().split('\n')
  expect(lines[0]).toBe('2/3 devices (active, 1 of 1 releases left)')
  expect(lines.slice(1).map((l) => l.replace(/ {2}last seen (.+)$/, (_, at) => `  last seen ${ISO.test(at) ? 'ISO' : at}`))).toEqual([
    `* ${fp.slice(0, 12)}…  alice's computer  last seen ISO`,
    `  ${laptop.slice(0, 12)}…  alice's laptop  last seen ISO`,
  ])

  // The laptop was lost: release its slot by the prefix the screen shows.
  expect(await user.cli('release', laptop.slice(0, 12))).toEqual({ stdout: 'released: 1/3 devices in use\n', stderr: '', code: 0 })
  detail = await keyDetail(k.id)
  expect(detail).toMatchObject({ activations_used: 1, deactivations_used: 1 })
  expect(detail.activations.find((a: any) => a.device_fingerprint === laptop)).toMatchObject({ status: 'deactivated', deactivation_reason: 'user' })
  expect((await user.cli('devices')).stdout).toStartWith(`1/3 devices (active, 0 of 1 releases left)\n* ${fp.slice(0, 12)}…  alice's computer`)
  expect(await user.cli('release', 'ffffffffffff')).toEqual({ stdout: '', stderr: 'no device starting with ffffffffffff\n', code: 1 })

  // The key allowed one release: releasing this device now is the node's 409 deactivation_limit, told
  // to the user; nothing is released and the app still runs.
  expect(await user.cli('release', 'this')).toEqual({ stdout: '', stderr: 'this key has no device releases left: contact support\n', code: 1 })
  detail = await keyDetail(k.id)
  expect(detail).toMatchObject({ activations_used: 1, deactivations_used: 1 })
  expect(detail.activations.find((a: any) => a.device_fingerprint === fp)).toMatchObject({ status: 'active' })
  const again = user.start(['run'])
  await again.stdoutHas('Hello from the licensed app.')
  expect((await quit(again)).stdout).toStartWith('licensed: plan pro, 1/3 devices\n')
})

test('offline: the node unreachable, the app runs on its stored signed answer and says so; a key never checked here gets no grace', async () => {
  const k = await key({ activation_limit: 2 })
  const user = install()
  const before = Date.now()
  expect(await user.cli('activate', k.key_value)).toEqual({ stdout: 'licensed: plan pro, 1/2 devices\n', stderr: '', code: 0 })
  const after = Date.now()

  proxy.refuse() // the license server is down: connection refused
  try {
    const run = user.start(['run'])
    await run.stdoutHas('Hello from the licensed app.')
    const offline = await quit(run)
    const m = /^licensed \(offline, last confirmed (\S+)\)\nHello from the licensed app\. \(Ctrl-C to quit\)\n$/.exec(offline.stdout)
    if (!m) throw new Error(`not an offline run: ${JSON.stringify(offline)}`)
    expect(m[1]).toMatch(ISO)
    // last confirmed: when the node signed the activation's answer
    expect(Date.parse(m[1]!)).toBeGreaterThanOrEqual(before - 1000)
    expect(Date.parse(m[1]!)).toBeLessThanOrEqual(after + 1000)
    expect(offline).toMatchObject({ stderr: '', code: 0 })

    // The device screen needs the server; a key this installation never confirmed gets no grace.
    expect(await user.cli('devices')).toEqual({ stdout: '', stderr: 'the license server cannot be reached: try again when online\n', code: 1 })
    const other = install()
    expect(await other.cli('activate', (await key()).key_value)).toEqual({
      stdout: '',
      stderr: 'the license server cannot be reached and the grace period is over (or never started)\n',
      code: 1,
    })
    expect(existsSync(join(other.home, 'key'))).toBe(false)
  } finally {
    proxy.restore()
  }

  // The node back: a fresh answer, online again.
  const back = user.start(['run'])
  await back.stdoutHas('Hello from the licensed app.')
  expect((await quit(back)).stdout).toStartWith('licensed: plan pro, 1/2 devices\n')
})

test('a key revoked through the management API ends the running app at its next heartbeat, refuses the next start, and leaves no grace', async () => {
  const k = await key()
  const user = install()
  expect((await user.cli('activate', k.key_value)).code).toBe(0)

  const run = user.start(['run'], { HEARTBEAT_SECONDS: '0.2' })
  await run.stdoutHas('Hello from the licensed app.')
  expect((await h.call('POST', `/v1/keys/${k.id}/revoke`, { token, body: {} })).status).toBe(200)
  expect(await run.done).toEqual({
    stdout: 'licensed: plan pro, 1/3 devices\nHello from the licensed app. (Ctrl-C to quit)\n',
    stderr: 'license lost: revoked\n',
    code: 2,
  })

  expect(await user.cli('run')).toEqual({ stdout: '', stderr: 'this key was revoked: contact support\n', code: 1 })
  // The refusal forgot the stored answer: with the node unreachable, no grace either.
  proxy.refuse()
  try {
    expect(await user.cli('run')).toEqual({
      stdout: '',
      stderr: 'the license server cannot be reached and the grace period is over (or never started)\n',
      code: 1,
    })
  } finally {
    proxy.restore()
  }
})

test('every device slot taken, and a retired token: the user is told why', async () => {
  const k = await key({ activation_limit: 1 })
  expect(await otherDevice(k.key_value, 'office PC')).toMatchObject({ valid: true, activationsUsed: 1 })
  const user = install()
  expect(await user.cli('activate', k.key_value)).toEqual({
    stdout: '',
    stderr: 'every device slot is taken: release one with `licensed-cli devices` / `release`\n',
    code: 1,
  })

  // The vendor rotates the token this build carries: the old one stops working.
  const created = await h.call('POST', '/v1/api-keys', { token, body: { name: 'build 1.0', scope: 'validate' } })
  expect(created.status).toBe(201)
  const old = install({ KEYWARD_TOKEN: created.body.token })
  const fresh = await key()
  expect((await old.cli('activate', fresh.key_value)).code).toBe(0)
  const rotated = await h.call('POST', `/v1/api-keys/${created.body.id}/rotate`, { token })
  expect(rotated.status).toBe(200)
  expect(await old.cli('devices')).toEqual({ stdout: '', stderr: 'this build carries a retired token: please update the app\n', code: 1 })
  // A 401 cannot be signed, so anyone could send one: the app runs on its stored answer (grace), as offline.
  const graced = old.start(['run'])
  await graced.stdoutHas('Hello from the licensed app.')
  expect((await quit(graced)).stdout).toStartWith('licensed (offline, last confirmed ')
  // Without a stored answer (another user of the old build), the user is told why.
  expect(await install({ KEYWARD_TOKEN: created.body.token }).cli('activate', fresh.key_value)).toEqual({
    stdout: '',
    stderr: 'this build carries a retired token: please update the app\n',
    code: 1,
  })
  const updated = await cli({ ...old.env, KEYWARD_TOKEN: rotated.body.token }, 'devices')
  expect(updated).toMatchObject({ stderr: '', code: 0 })
  expect(updated.stdout).toStartWith('1/3 devices (active)\n* ')
})

test('offline licenses the node issued: this device\'s is accepted with no network at all, another device\'s refused', async () => {
  const k = await key()
  const user = install()
  const fp = (await user.cli('fingerprint')).stdout.trim()
  const issue = async (device: string) => {
    const res = await h.call('POST', `/v1/keys/${k.id}/offline-licenses`, { token, body: { device_fingerprint: device, ttl_seconds: 86_400 } })
    expect(res.status).toBe(201)
    return res.body as { license: string; payload: { expires_at: string } }
  }
  const mine = await issue(fp)
  const theirs = await issue(randomFingerprint())
  const file = join(user.home, 'offline.lic')
  proxy.refuse()
  try {
    writeFileSync(file, mine.license)
    expect(await user.cli('offline', file)).toEqual({ stdout: `licensed offline until ${mine.payload.expires_at} (plan pro)\n`, stderr: '', code: 0 })
    writeFileSync(file, theirs.license)
    expect(await user.cli('offline', file)).toEqual({ stdout: '', stderr: 'offline license refused: wrong_device\n', code: 1 })
  } finally {
    proxy.restore()
  }
})

test('a feature gated by an entitlement: `export` runs with the key\'s `export` entitlement (offline too, from the stored answer); without it the user is told and nothing is written', async () => {
  const pro = await key({ entitlements: { export: true, projects: 5 } })
  const user = install()
  const licensedPro = 'licensed: plan pro, 1/3 devices, features: export, projects=5\n'
  expect(await user.cli('activate', pro.key_value)).toEqual({ stdout: licensedPro, stderr: '', code: 0 })
  const first = join(user.home, 'first.json')
  expect(await user.cli('export', first)).toEqual({ stdout: `${licensedPro}exported to ${first}\n`, stderr: '', code: 0 })
  expect(JSON.parse(readFileSync(first, 'utf8'))).toMatchObject({ projects: [] })

  // The node unreachable: the stored signed answer lists `export`, so the feature still works offline.
  const offline = join(user.home, 'offline.json')
  proxy.refuse()
  try {
    const out = await user.cli('export', offline)
    expect(out).toMatchObject({ stderr: '', code: 0 })
    expect(out.stdout).toMatch(/^licensed \(offline, last confirmed \S+\)\nexported to /)
    expect(existsSync(offline)).toBe(true)
  } finally {
    proxy.restore()
  }

  // The vendor takes `export` off the key: the next export is refused by the node, nothing written;
  // the app itself still runs.
  expect((await h.call('PATCH', `/v1/keys/${pro.id}`, { token, body: { entitlements: { projects: 5 } } })).status).toBe(200)
  const refused = join(user.home, 'refused.json')
  expect(await user.cli('export', refused)).toEqual({ stdout: '', stderr: 'your license does not include export: upgrade it to use this\n', code: 1 })
  expect(existsSync(refused)).toBe(false)
  const run = user.start(['run'])
  await run.stdoutHas('Hello from the licensed app.')
  expect((await quit(run)).stdout).toStartWith('licensed: plan pro, 1/3 devices, features: projects=5\n')

  // A basic key (no entitlements): activated as before, export refused.
  const basic = install()
  expect(await basic.cli('activate', (await key({ plan: 'basic' })).key_value)).toEqual({ stdout: 'licensed: plan basic, 1/3 devices\n', stderr: '', code: 0 })
  expect(await basic.cli('export', join(basic.home, 'x.json'))).toEqual({ stdout: '', stderr: 'your license does not include export: upgrade it to use this\n', code: 1 })
})

test('a computer clock 10 minutes off: the user is told to set it right, not that the answer is forged', async () => {
  const fake: FakeServer = startFakeServer()
  fake.mode = 'stale' // a genuine signature, signed 10 minutes before this computer's clock
  try {
    const user = install({ KEYWARD_URL: fake.url, KEYWARD_TOKEN: 'kw_test', KEYWARD_PUBLIC_KEY: fake.publicKeyRaw })
    const out = await user.cli('activate', 'ABCDE-FGHJK-MNPQR-STVWX-YZ012')
    expect(out).toMatchObject({ stdout: '', code: 1 })
    expect(out.stderr).toMatch(/^this device's clock is about 10 minutes ahead of the license server's: set the date and time right and try again\n$/)
  } finally {
    await fake.stop()
  }
})

test('forged answers are refused: an impostor server signing with its own key, a genuine answer altered on the way', async () => {
  // An impostor answers "valid" to anything (the fake server, signing with a key of its own).
  const fake: FakeServer = startFakeServer()
  try {
    const user = install({ KEYWARD_URL: fake.url, KEYWARD_TOKEN: 'kw_test' })
    expect(await user.cli('activate', 'ABCDE-FGHJK-MNPQR-STVWX-YZ012')).toEqual({
      stdout: '',
      stderr: 'the answer was not signed by the license server: refusing it\n',
      code: 1,
    })
    expect(fake.requests.map((r) => r.path)).toEqual(['/v1/validate'])
    expect(existsSync(join(user.home, 'key'))).toBe(false)
    expect(await user.cli('run')).toEqual({ stdout: '', stderr: 'not activated: licensed-cli activate <KEY>\n', code: 1 })
  } finally {
    await fake.stop()
  }

  // The node's own signed answer, its plan rewritten by someone in the middle.
  const k = await key({ plan: 'basic' })
  let altered = 0
  const mitm = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const url = new URL(req.url)
      const res = await fetch(h.node.url + url.pathname, { method: req.method, headers: req.headers, body: await req.arrayBuffer() })
      const text = await res.text()
      const forged = text.replace('"plan":"basic"', '"plan":"enterprise"')
      if (forged !== text) altered++
      const headers = new Headers(res.headers)
      headers.delete('content-length')
      return new Response(forged, { status: res.status, headers })
    },
  })
  try {
    const user = install({ KEYWARD_URL: `http://127.0.0.1:${mitm.port}` })
    expect(await user.cli('activate', k.key_value)).toEqual({
      stdout: '',
      stderr: 'the answer was not signed by the license server: refusing it\n',
      code: 1,
    })
    expect(altered).toBeGreaterThan(0)
    expect(existsSync(join(user.home, 'key'))).toBe(false)
  } finally {
    mitm.stop(true)
  }
  // Straight to the node, the same key activates with its real plan.
  expect((await install().cli('activate', k.key_value)).stdout).toBe('licensed: plan basic, 1/3 devices\n')
})

test('identity: machineIdentity() names its components; KEYWARD_MACHINE_ID makes a container its own device; the node stores the components', async () => {
  const host = install()
  const shown = await host.cli('identity')
  expect(shown.code).toBe(0)
  expect(shown.stdout).toMatch(/^fingerprint [0-9a-f]{64} \(from machine_id\)\ncomponents: machine_id, .*cpu, hostname\n$/)
  const podA = install({ KEYWARD_MACHINE_ID: 'pod-a-0001' })
  const podB = install({ KEYWARD_MACHINE_ID: 'pod-b-0002' })
  const fpA = (await podA.cli('fingerprint')).stdout.trim()
  const fpB = (await podB.cli('fingerprint')).stdout.trim()
  expect(new Set([fpA, fpB, (await host.cli('fingerprint')).stdout.trim()]).size).toBe(3)
  expect((await podA.cli('identity')).stdout).toContain('(from container)\ncomponents: container\n')
  const k = await key({ activation_limit: 3 })
  expect((await podA.cli('activate', k.key_value)).code).toBe(0)
  const a = (await keyDetail(k.id)).activations[0]
  expect(a.device_fingerprint).toBe(fpA)
  // Needs the server side of machine identity: the activation shows what the app sent.
  expect(Object.keys(a.components ?? {})).toEqual(['container'])
})

test('a copied disk image is told as such: device_mismatch in words (key with component_match all)', async () => {
  const k = await key({ activation_limit: 2, component_match: 'all' })
  const original = install()
  expect((await original.cli('activate', k.key_value)).code).toBe(0)
  // The copy: the same machine id (so the same fingerprint), another hostname, so not all components match.
  const copy = install()
  // (A fresh UTS namespace, `unshare -ru`, gives it another hostname; asynchronous, as the proxy runs in this process.)
  const renamed = Bun.spawn(['unshare', '-ru', 'sh', '-c', `hostname copied-image && exec node ${join(app, 'licensed-cli.mjs')} activate ${k.key_value}`], { env: copy.env, stdout: 'pipe', stderr: 'pipe' })
  const [stderr, code] = await Promise.all([new Response(renamed.stderr).text(), renamed.exited])
  expect(stderr).toBe('this computer does not match the one this key was activated on (a copied disk image or virtual machine?): release that device with `licensed-cli devices` / `release`, or contact support\n')
  expect(code).toBe(1)
})

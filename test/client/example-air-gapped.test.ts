// The example app's "activate without internet" (examples/licensed-cli: activate-offline,
// deactivate-offline) run by Node as a user would, one process per command, on a "computer" whose
// configured license server cannot be reached (KEYWARD_URL points at a closed port), while a real node
// started here plays the online machine (the vendor's page calling the API with a validate token): the
// request code printed with its QR, the response pasted on stdin, the app running on its license, a
// wrong or altered response refused with a sentence, the deactivation code releasing the seat, and the
// receipt checked by the app.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { newKey, useHarness } from '../support/harness'
import { vendorOn } from './vendor'
import { qrText } from '../../client/src/qr.ts'

setDefaultTimeout(120_000)
const h = useHarness()
const ROOT = join(import.meta.dir, '..', '..', 'client')

let token: string
let validateToken: string
let productId: string
let publicKey: string
let app: string
let homes = 0
beforeAll(async () => {
  const built = Bun.spawnSync([join(ROOT, '..', 'node_modules', '.bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')])
  if (built.exitCode !== 0) throw new Error(`client build failed: ${built.stdout}`)
  app = mkdtempSync(join(tmpdir(), 'licensed-cli-airgap-'))
  copyFileSync(join(ROOT, '..', 'examples', 'licensed-cli', 'licensed-cli.mjs'), join(app, 'licensed-cli.mjs'))
  mkdirSync(join(app, 'node_modules', '@keyward'), { recursive: true })
  // The SDK's QR entry point finds its peer dependency (qrcode-generator) beside the SDK's own build.
  symlinkSync(ROOT, join(app, 'node_modules', '@keyward', 'client'))
  const vendor = await vendorOn(h)
  ;({ token, validateToken, productId } = vendor)
  publicKey = vendor.publicKey.raw
})
afterAll(() => {
  if (app) rmSync(app, { recursive: true, force: true })
})

/** One air-gapped installation: the configured server is a closed port on this machine. */
function install(extra: Record<string, string> = {}) {
  const home = join(app, `home-${++homes}`)
  const env = {
    ...extra,
    PATH: process.env.PATH!,
    KEYWARD_URL: 'http://127.0.0.1:9',
    KEYWARD_TOKEN: validateToken,
    KEYWARD_PUBLIC_KEY: publicKey,
    KEYWARD_PRODUCT_ID: productId,
    LICENSED_CLI_HOME: home,
    USER: 'alice',
  }
  /** Runs one command, typing `stdin` (then end of input). */
  const cli = async (args: string[], stdin = '') => {
    const proc = Bun.spawn(['node', join(app, 'licensed-cli.mjs'), ...args], { env, stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' })
    proc.stdin.write(stdin)
    await proc.stdin.end()
    const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
    return { stdout, stderr, code: await proc.exited }
  }
  /** A running command: its output so far, typing into it, its end. */
  const start = (args: string[]) => {
    const proc = Bun.spawn(['node', join(app, 'licensed-cli.mjs'), ...args], { env, stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' })
    let stdout = ''
    const decoder = new TextDecoder()
    const reading = (async () => {
      for await (const chunk of proc.stdout) stdout += decoder.decode(chunk, { stream: true })
    })()
    const stderr = new Response(proc.stderr).text()
    return {
      async stdoutHas(text: string) {
        for (let i = 0; i < 600 && !stdout.includes(text) && proc.exitCode === null; i++) await Bun.sleep(100)
        if (!stdout.includes(text)) throw new Error(`no "${text}" in ${stdout} (exit ${proc.exitCode})`)
        return stdout
      },
      type(text: string) {
        proc.stdin.write(text)
        void proc.stdin.end()
      },
      done: Promise.all([reading, stderr, proc.exited]).then(([, err, code]) => ({ stdout, stderr: err, code })),
    }
  }
  return { home, cli, start }
}

const codeIn = (stdout: string, prefix: string) => {
  const m = new RegExp(`^(${prefix}\\.[A-Za-z0-9_.-]+)$`, 'm').exec(stdout)
  if (!m) throw new Error(`no ${prefix} code in ${stdout}`)
  return m[1]!
}

test('activate-offline: request code and QR printed, response pasted, the app runs; deactivate-offline frees the seat and checks the receipt', async () => {
  const k = (await newKey(h.call, token, productId, { plan: 'pro', activation_limit: 1 })) as { id: string; key_value: string }
  const user = install()
  expect((await user.cli(['run'])).code).toBe(1) // not activated

  // Step 1 on the air-gapped computer: the request, nothing pasted yet (Ctrl-D): kept pending.
  const first = await user.cli(['activate-offline', k.key_value])
  expect(first.code).toBe(0)
  const request = codeIn(first.stdout, 'KWREQ1')
  expect(first.stdout).toContain(qrText(request)) // the QR code of the request, drawn as text
  expect(first.stdout).toContain('waiting for the response code')
  expect(statSync(join(user.home, 'state.json')).mode & 0o777).toBe(0o600)

  // Step 2 on the online machine.
  const answered = await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request } })
  expect(answered.status).toBe(201)
  const response: string = answered.body.response

  // A response altered on the way is refused with a sentence; nothing is stored.
  const altered = response.slice(0, 80) + (response[80] === 'A' ? 'B' : 'A') + response.slice(81)
  const refused = await user.cli(['activate-offline', '--response', '-'], `${altered}\n`)
  expect(refused.code).toBe(1)
  expect(refused.stderr).toMatch(/not signed by the license server|not a response code/)

  // Step 3 back on the air-gapped computer: the response from a file (as carried on a USB stick).
  writeFileSync(join(app, 'response.txt'), `${response.replace(/(.{64})/g, '$1\n')}\n`)
  const accepted = await user.cli(['activate-offline', '--response', join(app, 'response.txt')])
  expect(accepted).toMatchObject({ code: 0, stderr: '' })
  expect(accepted.stdout).toMatch(/^activated without internet: licensed until \S+ \(plan pro\)\n$/)
  const run = await user.cli(['run'])
  expect(run).toMatchObject({ code: 0, stderr: '' })
  expect(run.stdout).toMatch(/^licensed without internet until /)
  expect((await h.call('GET', `/v1/keys/${k.id}`, { token })).body.activations_used).toBe(1)

  // A response to an earlier request code: this computer made a new request since, so it is refused.
  const second = install()
  const other = (await newKey(h.call, token, productId, { plan: 'pro' })) as { key_value: string }
  const earlier = await second.cli(['activate-offline', other.key_value])
  const earlierResponse = (await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request: codeIn(earlier.stdout, 'KWREQ1') } })).body.response
  const stale = await second.cli(['activate-offline', other.key_value], `${earlierResponse}\n\n`)
  expect(stale.code).toBe(1)
  expect(stale.stderr).toContain('that response answers another request code')

  // The whole exchange in one sitting: the app prints the request, waits, and the response is pasted.
  // With OFFLINE_PAGE_URL, the QR code opens the product's page with the request filled in.
  const page = `${h.node.url}/portal/${productId}/offline`
  const third = install({ OFFLINE_PAGE_URL: page })
  const live = third.start(['activate-offline', other.key_value])
  const printed = await live.stdoutHas('Paste the response code')
  expect(printed).toContain(qrText(`${page}#request=${codeIn(printed, 'KWREQ1')}`))
  const liveResponse = (await h.call('POST', '/v1/offline/activations', { token: validateToken, body: { request: codeIn(printed, 'KWREQ1') } })).body.response
  live.type(`${liveResponse}\n\n`)
  const done = await live.done
  expect(done).toMatchObject({ code: 0, stderr: '' })
  expect(done.stdout).toContain('activated without internet: licensed until ')

  // Deactivation: the code printed (and its QR), the license gone here; the online machine releases the seat.
  const deact = await user.cli(['deactivate-offline'])
  expect(deact.code).toBe(0)
  expect(deact.stdout).toContain('This computer no longer holds the license.')
  const code = codeIn(deact.stdout, 'KWDEA1')
  expect((await user.cli(['run'])).code).toBe(1)
  const released = await h.call('POST', '/v1/offline/deactivations', { token: validateToken, body: { code } })
  expect(released.status).toBe(200)
  expect(released.body.released).toBe(true)
  expect((await h.call('GET', `/v1/keys/${k.id}`, { token })).body.activations_used).toBe(0)
  const receipt = await user.cli(['deactivate-offline', '--receipt', '-'], `${released.body.receipt}\n`)
  expect(receipt).toMatchObject({ code: 0, stderr: '' })
  expect(receipt.stdout).toContain(`released activation ${answered.body.activation_id}`)
  // A receipt someone made up is refused.
  const [head, payload] = released.body.receipt.split('.')
  expect((await user.cli(['deactivate-offline', '--receipt', '-'], `${head}.${payload}.${'A'.repeat(86)}\n`)).code).toBe(1)
})

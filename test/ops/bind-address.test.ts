// The bind address is a setting (HOST): by default this machine only, and the start banner says what is
// really bound. Checked by connecting through this machine's non-loopback address, which reaches a node
// on every interface (HOST=0.0.0.0) and not one on the default.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config'
import { embeddedEnv } from '../support/helpers'

setDefaultTimeout(120_000)

const ROOT = join(import.meta.dir, '..', '..')
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-host-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** An IPv4 address of this machine that is not the loopback (CI machines have one). */
const external = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address

/** Starts a node with `env`, returns its banner once it listens, and a stop. */
async function start(env: Record<string, string>) {
  const proc = Bun.spawn(['bun', 'src/main.ts'], { cwd: ROOT, env: embeddedEnv({ DATA_DIR: dataDir, ...env }), stdout: 'pipe', stderr: 'pipe' })
  const decoder = new TextDecoder()
  let out = ''
  const reader = proc.stdout.getReader()
  const deadline = Date.now() + 90_000
  while (!/Keyward listening on .*\n/.test(out) && Date.now() < deadline) {
    const { value, done } = await reader.read()
    if (done) break
    out += decoder.decode(value, { stream: true })
  }
  reader.releaseLock()
  const line = /Keyward listening on .*/.exec(out)?.[0]
  if (!line) throw new Error(`no banner: ${out} ${await new Response(proc.stderr).text()}`)
  const port = Number(/:(\d+)/.exec(line.slice('Keyward listening on http://'.length))![1])
  return { line, port, stop: async () => { proc.kill('SIGTERM'); await proc.exited } }
}

const reaches = (host: string, port: number) =>
  fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(5_000) }).then((r) => r.status === 200, () => false)

test('HOST defaults to 127.0.0.1 (this machine only)', () => {
  expect(loadConfig({}).host).toBe('127.0.0.1')
  expect(loadConfig({ HOST: '0.0.0.0' }).host).toBe('0.0.0.0')
})

test('the default binds the loopback only, and the banner says so', async () => {
  if (!external) throw new Error('this machine has no non-loopback IPv4 address to test with')
  const node = await start({ HOST: '' }) // empty = unset (config.ts)
  try {
    expect(node.line).toContain('http://127.0.0.1:')
    expect(node.line).toContain('HOST=127.0.0.1: this machine only')
    expect(await reaches('127.0.0.1', node.port)).toBe(true)
    expect(await reaches(external, node.port)).toBe(false)
  } finally {
    await node.stop()
  }
})

test('HOST=0.0.0.0 serves every interface, and the banner says it is reachable from the network', async () => {
  if (!external) throw new Error('this machine has no non-loopback IPv4 address to test with')
  const node = await start({ HOST: '0.0.0.0' })
  try {
    expect(node.line).toContain('HOST=0.0.0.0: every interface: reachable from the network')
    expect(await reaches(external, node.port)).toBe(true)
  } finally {
    await node.stop()
  }
})

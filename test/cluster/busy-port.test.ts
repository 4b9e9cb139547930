// A start that cannot take its port says so plainly (no stack) and consumes nothing: the one-time demo
// token is still issued by the next successful start.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { embeddedEnv } from '../support/helpers'

setDefaultTimeout(120_000)

const ROOT = join(import.meta.dir, '..', '..')
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-busy-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** Runs a node until it exits, or until its output matches `until` (then SIGTERM), at most `seconds`. */
async function run(port: number, seconds: number, until?: RegExp) {
  const proc = Bun.spawn(['bun', 'src/main.ts'], {
    cwd: ROOT,
    env: embeddedEnv({ DATA_DIR: dataDir, PORT: String(port) }),
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const timer = setTimeout(() => proc.kill('SIGTERM'), seconds * 1000)
  const readOut = async () => {
    let out = ''
    const decoder = new TextDecoder()
    for await (const chunk of proc.stdout) {
      out += decoder.decode(chunk, { stream: true })
      if (until?.test(out)) proc.kill('SIGTERM') // started: however long the start took on a loaded machine
    }
    return out
  }
  const [out, err] = await Promise.all([readOut(), new Response(proc.stderr).text()])
  const code = await proc.exited
  clearTimeout(timer)
  return { code, out, err }
}

test('a busy port is a one-line error, and the demo token survives for the next start', async () => {
  const squatter = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  try {
    const busy = await run(squatter.port, 60)
    expect(busy.code).toBe(1)
    expect(busy.err).toContain(`the port is in use`)
    expect(busy.err).not.toContain(' at ') // no stack trace
    expect(busy.out).not.toContain('kw_')
  } finally {
    squatter.stop(true)
  }
  const token = /shown only this once:\n\s+kw_[A-Za-z0-9]{32}/
  const ok = await run(0, 90, token)
  expect(ok.out).toContain('Keyward listening on')
  expect(ok.out).toMatch(token)
})

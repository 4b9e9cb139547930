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

async function run(port: number, seconds: number) {
  const proc = Bun.spawn(['bun', 'src/main.ts'], {
    cwd: ROOT,
    env: embeddedEnv({ DATA_DIR: dataDir, PORT: String(port) }),
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const timer = setTimeout(() => proc.kill('SIGTERM'), seconds * 1000)
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
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
  const ok = await run(0, 8)
  expect(ok.out).toContain('Keyward listening on')
  expect(ok.out).toMatch(/shown only this once:\n\s+kw_[A-Za-z0-9]{32}/)
})

// Embedded mode survives a restart: `bun run start` on a temp DATA_DIR, create data, stop, start again on
// the same DATA_DIR, and everything is still there. The demo account is created (and its token printed)
// on the first start only.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startEmbedded } from '../../src/infra/db'
import { client } from '../support/harness'
import { embeddedEnv } from '../support/helpers'

setDefaultTimeout(120_000)

const ROOT = join(import.meta.dir, '..', '..')
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-persist-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** Starts `bun run start`, waits for its banner, returns its URL and everything it printed so far. */
async function start(): Promise<{ url: string; output: () => string; stop(): Promise<string> }> {
  const proc = Bun.spawn(['bun', 'run', 'start'], { cwd: ROOT, env: embeddedEnv({ DATA_DIR: dataDir }), stdout: 'pipe', stderr: 'pipe' })
  let out = ''
  const reader = proc.stdout.getReader()
  const pump = (async () => {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      out += new TextDecoder().decode(value)
    }
  })()
  const deadline = Date.now() + 90_000
  while (!/API docs: .*\n/.test(out)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      throw new Error(`server did not start (exit ${proc.exitCode}): ${out}\n${await new Response(proc.stderr).text()}`)
    }
    await Bun.sleep(50)
  }
  const url = /listening on (http:\/\/\S+)/.exec(out)![1]
  return {
    url,
    output: () => out,
    async stop() {
      proc.kill('SIGTERM')
      await proc.exited
      await pump
      return out
    },
  }
}

test('data and the demo account survive a restart; the demo token is printed on the first start only', async () => {
  const first = await start()
  let firstOutput: string
  let token: string
  let productId: string
  let keyId: string
  let publicKey: string
  try {
    // the banner and the demo lines are printed together; wait for the whole block
    const call = client(first.url)
    expect((await call('GET', '/healthz')).status).toBe(200)
    await Bun.sleep(100)
    const match = /shown only this once:\n\s+(kw_[A-Za-z0-9]{32})/.exec(first.output())
    expect(match).not.toBeNull()
    token = match![1]
    const ping = await call('GET', '/v1/ping', { token })
    expect(ping.status).toBe(200)
    expect((await call('GET', '/v1/api-keys', { token })).body.data).toHaveLength(1)
    const product = await call('POST', '/v1/products', { token, body: { name: 'Persisted', slug: 'persisted' } })
    expect(product.status).toBe(201)
    productId = product.body.id
    const key = await call('POST', '/v1/keys', { token, body: { product_id: productId, plan: 'pro' } })
    keyId = key.body.id
    const apiKey = await call('POST', '/v1/api-keys', { token, body: { name: 'second', scope: 'keys:read' } })
    expect(apiKey.status).toBe(201)
    publicKey = (await call('GET', '/v1/offline/public-key', { token })).body.public_key
  } finally {
    firstOutput = await first.stop()
  }
  expect(firstOutput.match(/kw_[A-Za-z0-9]{32}/g)!.length).toBeGreaterThanOrEqual(1)
  expect(firstOutput).toContain('Demo account created (plan growth)')
  expect(firstOutput).toMatch(/Console: http:\/\/\S+\/console /)
  // the embedded store and the generated secret key live under DATA_DIR, the key readable by us only
  expect(statSync(join(dataDir, 'pgdata')).isDirectory()).toBe(true)
  expect(statSync(join(dataDir, 'secret.key')).mode & 0o077).toBe(0)

  const second = await start()
  try {
    const call = client(second.url)
    expect((await call('GET', '/healthz')).status).toBe(200)
    await Bun.sleep(100)
    expect(second.output()).not.toContain('Demo account')
    expect(second.output()).not.toMatch(/kw_[A-Za-z0-9]{32}/)
    const ping = await call('GET', '/v1/ping', { token })
    expect(ping.status).toBe(200)
    const product = await call('GET', `/v1/products/${productId}`, { token })
    expect(product.body).toMatchObject({ id: productId, name: 'Persisted', slug: 'persisted', active_keys: 1 })
    const key = await call('GET', `/v1/keys/${keyId}`, { token })
    expect(key.body).toMatchObject({ id: keyId, plan: 'pro', status: 'active' })
    expect((await call('GET', '/v1/api-keys', { token })).body.data).toHaveLength(2)
    // the signing key pair was sealed with the generated secret key, which survived too
    const offline = await call('GET', '/v1/offline/public-key', { token })
    expect(offline.body.public_key).toBe(publicKey)
  } finally {
    const out = await second.stop()
    expect(out).not.toContain('Demo account')
  }
  // exactly one account: the demo was not created a second time
  const db = await startEmbedded(dataDir)
  try {
    const [{ n }] = await db.sql`select count(*)::int as n from accounts`
    expect(n).toBe(1)
  } finally {
    await db.close()
  }
})

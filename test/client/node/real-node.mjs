// The built SDK package (client/dist/) under Node ≥ 20, no Bun in this process, against a real Keyward
// node (its own process, `bun src/main.ts`, embedded database): validate, devices and deactivate
// verified with Node's own WebCrypto, before and after a signing key rotation (the answer's certificate
// checked with only the pinned root). Run: node --test test/client/node/real-node.mjs (after building client/).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Keyward, SignatureError, memoryStorage } from '../../../client/dist/index.js'

const raw = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x, 'base64url').toString('base64')
const dir = mkdtempSync(join(tmpdir(), 'keyward-node-'))
after(() => rmSync(dir, { recursive: true, force: true }))

test('against a real Keyward node: validate, devices and deactivate, verified with Node\'s WebCrypto, through a rotation', async (t) => {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
  const env = { ...process.env, PORT: '0', HOST: '127.0.0.1', ADMIN_TOKEN: 'node-smoke-admin-token-0123456789', DEMO_ACCOUNT: 'false', LOG_LEVEL: 'warn', DATA_DIR: join(dir, 'node-data') }
  for (const name of ['DATABASE_URL', 'NATS_URL', 'REDIS_URL', 'SECRET_KEY']) delete env[name] // embedded: its own database
  const child = spawn(process.env.BUN ?? 'bun', [join(root, 'src', 'main.ts')], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.after(async () => {
    child.kill()
    await exited // its data directory goes with `dir`, after it stopped writing
  })
  const url = await new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (chunk) => {
      out += chunk
      const m = /Keyward listening on (http:\/\/\S+)/.exec(out)
      if (m) resolve(m[1])
    })
    child.on('exit', (code) => reject(new Error(`the node exited (${code}) before listening: ${out}`)))
    child.on('error', reject)
  })
  const call = async (method, path, token, body) => {
    const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body && JSON.stringify(body) })
    return res.json()
  }
  const account = await call('POST', '/admin/accounts', env.ADMIN_TOKEN, { name: 'Node smoke', plan: 'growth' })
  const admin = account.api_key.token
  const token = (await call('POST', '/v1/api-keys', admin, { name: 'app', scope: 'validate' })).token
  const product = await call('POST', '/v1/products', admin, { name: 'Smoke', slug: 'smoke' })
  const key = await call('POST', '/v1/keys', admin, { product_id: product.id, plan: 'node' })
  const { public_key } = await call('GET', '/v1/offline/public-key', token)

  const kw = new Keyward({ baseUrl: url, token, rootPublicKey: public_key, productId: product.id, storage: memoryStorage(), retries: 0 })
  const ok = await kw.validate({ key: key.key_value, deviceName: 'node 20', appVersion: process.version })
  assert.equal(ok.valid, true)
  assert.equal(ok.plan, 'node')
  assert.equal(ok.offline, false)
  assert.ok(Math.abs(Date.now() - ok.signedAt.getTime()) < 300_000)
  const screen = await kw.devices()
  assert.deepEqual(screen.devices.map((d) => [d.name, d.appVersion, d.current]), [['node 20', process.version, true]])
  // The same genuine answer checked against another key: refused (no stored answer to stand in).
  const wrongKey = new Keyward({ baseUrl: url, token, publicKey: raw, productId: product.id, storage: memoryStorage(), retries: 0 })
  await assert.rejects(wrongKey.validate({ key: key.key_value }), SignatureError)
  // A signing key activated: the same app (only the root pinned) verifies its certificate and its answers.
  const signing = await call('POST', '/v1/signing-keys', admin, {})
  assert.equal((await call('POST', `/v1/signing-keys/${signing.kid}/activate`, admin, {})).state, 'active')
  const rotated = await kw.validate()
  assert.deepEqual([rotated.valid, rotated.offline], [true, false])
  assert.equal((await kw.signingKeys())?.keys.find((k) => k.kid === signing.kid)?.state, 'active')
  assert.deepEqual(await kw.deactivate(), { deactivated: true, activationsUsed: 0, activationLimit: key.activation_limit })
})

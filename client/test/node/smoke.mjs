// The built package (dist/) under Node ≥ 20, no Bun in this process: a node:http fake server signs
// answers as the contract says; validate verifies them, refuses forgeries, falls back to grace; offline
// licenses, fingerprint and file storage work with Node's own WebCrypto. Then a real Keyward node (its
// own process, `bun src/main.ts`, embedded database): validate, devices and deactivate verified by Node.
// Run: node --test client/test/node/smoke.mjs (after building client/).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { generateKeyPairSync, sign } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Keyward, SignatureError, UnreachableError, fileStorage, memoryStorage } from '../../dist/index.js'

const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const other = generateKeyPairSync('ed25519').privateKey
const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x, 'base64url').toString('base64')
let mode = 'ok'

const server = createServer((req, res) => {
  let data = ''
  req.on('data', (c) => (data += c))
  req.on('end', () => {
    const nonce = req.headers['keyward-nonce']
    if (mode === 'down') {
      res.writeHead(503, { 'content-type': 'application/problem+json' })
      return res.end(JSON.stringify({ type: 'https://keyward.dev/errors/unavailable', title: 'Unavailable', status: 503, detail: 'later', code: 'unavailable', request_id: 'req_1' }))
    }
    const body = JSON.stringify({ valid: true, plan: 'node', expires_at: null, activations_used: 1, activation_limit: 2 })
    const t = Date.now()
    const msg = Buffer.from(`keyward-answer/v1\n${req.url}\n${nonce}\n${t}\n${body}`)
    const sig = sign(null, msg, mode === 'forged' ? other : privateKey).toString('base64')
    res.writeHead(200, { 'content-type': 'application/json', 'keyward-signature': `alg=ed25519, kid=k, t=${t}, sig=${sig}` })
    res.end(body)
  })
})
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const baseUrl = `http://127.0.0.1:${server.address().port}`
const dir = mkdtempSync(join(tmpdir(), 'keyward-node-'))
after(() => {
  server.close()
  rmSync(dir, { recursive: true, force: true })
})

const KEY = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012'

test('validate: verified answer, forged answer refused, grace from a file after a restart', async () => {
  const path = join(dir, 'state.json')
  const kw = new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: fileStorage(path), backoffMs: 1 })
  const ok = await kw.validate({ key: KEY })
  assert.equal(ok.valid, true)
  assert.equal(ok.plan, 'node')
  assert.equal(ok.offline, false)
  mode = 'forged'
  await assert.rejects(kw.validate(), SignatureError)
  mode = 'down'
  const restarted = new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: fileStorage(path), backoffMs: 1, retries: 1 })
  const offline = await restarted.validate({ key: KEY })
  assert.equal(offline.valid, true)
  assert.equal(offline.offline, true)
  const fresh = new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, storage: memoryStorage(), backoffMs: 1, retries: 1 })
  await assert.rejects(fresh.validate({ key: KEY }), UnreachableError)
  mode = 'ok'
})

test('fingerprint: 64 hex and stable; verifyLicense on a license in the documented format', async () => {
  const kw = new Keyward({ baseUrl, token: 'kw_x', publicKey: publicKey.export({ format: 'pem', type: 'spki' }).toString(), productId: 'prod_N', storage: memoryStorage() })
  const fp = await kw.fingerprint()
  assert.match(fp, /^[0-9a-f]{64}$/)
  assert.equal(await new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: memoryStorage() }).fingerprint(), fp)

  const now = Date.now()
  const payload = { v: 1, id: 'lic_1', account_id: 'acct_1', key_id: 'key_1', product_id: 'prod_N', plan: null, device_fingerprint: fp, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3600_000).toISOString() }
  const enc = Buffer.from(JSON.stringify(payload)).toString('base64')
  const sig = sign(null, Buffer.from(`license/${enc}`), privateKey).toString('base64')
  const outer = Buffer.from(JSON.stringify({ enc, sig, alg: 'base64+ed25519', kid: 'k' })).toString('base64')
  const text = `-----BEGIN KEYWARD LICENSE-----\n${outer.match(/.{1,64}/g).join('\n')}\n-----END KEYWARD LICENSE-----\n`
  const result = await kw.verifyLicense(text)
  assert.equal(result.valid, true)
  assert.deepEqual(result.license, payload)
  const forged = text.replace(/[A-Za-z](?=[^\n]*\n-----END)/, (c) => (c === 'A' ? 'B' : 'A'))
  assert.equal((await kw.verifyLicense(forged)).valid, false)
})

test('against a real Keyward node: validate, devices and deactivate, verified with Node\'s WebCrypto', async (t) => {
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

  const kw = new Keyward({ baseUrl: url, token, publicKey: public_key, productId: product.id, storage: memoryStorage(), retries: 0 })
  const ok = await kw.validate({ key: key.key_value, deviceName: 'node 20', appVersion: process.version })
  assert.equal(ok.valid, true)
  assert.equal(ok.plan, 'node')
  assert.equal(ok.offline, false)
  assert.ok(Math.abs(Date.now() - ok.signedAt.getTime()) < 300_000)
  const screen = await kw.devices()
  assert.deepEqual(screen.devices.map((d) => [d.name, d.appVersion, d.current]), [['node 20', process.version, true]])
  // The same genuine answer checked against another key: refused.
  const wrongKey = new Keyward({ baseUrl: url, token, publicKey: raw, productId: product.id, storage: memoryStorage(), retries: 0 })
  await assert.rejects(wrongKey.validate({ key: key.key_value }), SignatureError)
  assert.deepEqual(await kw.deactivate(), { deactivated: true, activationsUsed: 0, activationLimit: key.activation_limit })
})

// The built package (dist/) under Node ≥ 20, no Bun in this process: a node:http fake server signs
// answers as docs/api.md "Signed answers" says (v3: the signer's kid inside, bound to the request body's
// SHA-256); validate
// verifies them, refuses forgeries, falls back to grace; offline licenses, fingerprint and file storage
// work with Node's own WebCrypto. (Against a real node: test/client/node/real-node.mjs.)
// Run: node --test client/test/node/smoke.mjs (after building client/).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import { createHash, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Keyward, OfflineResponseError, SignatureError, fileStorage, machineIdentity, memoryStorage } from '../../dist/index.js'
import { qrText } from '../../dist/qr.js'

const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const other = generateKeyPairSync('ed25519').privateKey
const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x, 'base64url').toString('base64')
const kid = createHash('sha256').update(Buffer.from(raw, 'base64')).digest('hex').slice(0, 32)
// A signing key the root certified (KWCERT1, docs/api.md "Signing keys"): mode 'certified' signs with it.
const signing = generateKeyPairSync('ed25519')
const signingRaw = Buffer.from(signing.publicKey.export({ format: 'jwk' }).x, 'base64url').toString('base64')
const signingKid = createHash('sha256').update(Buffer.from(signingRaw, 'base64')).digest('hex').slice(0, 32)
const certBody = `KWCERT1.${Buffer.from(JSON.stringify({ kid: signingKid, public_key: signingRaw, account_id: 'acct_1', created_at: new Date().toISOString() })).toString('base64url')}`
const certificate = `${certBody}.${sign(null, Buffer.from(certBody), privateKey).toString('base64url')}`
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
    const body = JSON.stringify({ valid: true, plan: 'node', expires_at: null, activations_used: 1, activation_limit: 2, policy_id: null, entitlements: { export: true, projects: 5 }, expired: false, grace_until: null })
    const t = Date.now()
    const digest = createHash('sha256').update(data, 'utf8').digest('hex')
    const signer = mode === 'certified' ? signingKid : kid
    const msg = Buffer.from(`keyward-answer/v3\n${signer}\n${req.url}\n${nonce}\n${t}\n${digest}\n${body}`)
    const sig = sign(null, msg, mode === 'forged' ? other : mode === 'certified' ? signing.privateKey : privateKey).toString('base64')
    const headers = { 'content-type': 'application/json', 'keyward-signature': `alg=ed25519, kid=${signer}, t=${t}, sig=${sig}` }
    if (mode === 'certified') headers['keyward-certificate'] = certificate
    res.writeHead(200, headers)
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
  const kw = new Keyward({ baseUrl, token: 'kw_x', rootPublicKey: raw, productId: 'prod_N', storage: fileStorage(path), backoffMs: 1 })
  mode = 'certified' // a signing key's answer, with its certificate: verified with only the root
  assert.equal((await kw.validate({ key: KEY })).offline, false)
  mode = 'ok'
  const ok = await kw.validate({ key: KEY })
  assert.equal(ok.valid, true)
  assert.equal(ok.plan, 'node')
  assert.equal(ok.offline, false)
  assert.deepEqual([ok.has('export'), ok.entitlement('projects'), ok.has('sso')], [true, 5, false])
  mode = 'forged'
  // A forged answer is refused: an error without a stored answer, and the stored one stands in with it.
  await assert.rejects(new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: memoryStorage() }).validate({ key: KEY }), SignatureError)
  assert.equal((await kw.validate()).offline, true)
  mode = 'down'
  const restarted = new Keyward({ baseUrl, token: 'kw_x', rootPublicKey: raw, productId: 'prod_N', storage: fileStorage(path), backoffMs: 1, retries: 1 })
  const offline = await restarted.validate({ key: KEY })
  assert.equal(offline.valid, true)
  assert.equal(offline.offline, true)
  assert.equal(offline.has('export'), true) // the stored answer's entitlements, read back from the file
  const fresh = new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, storage: memoryStorage(), backoffMs: 1, retries: 1 })
  // Nothing stored: the unsigned 503 (as a gateway in front would send) is not the service's word.
  await assert.rejects(fresh.validate({ key: KEY }), (err) => err instanceof SignatureError && err.status === 503)
  mode = 'ok'
})

test('fingerprint: 64 hex and stable; verifyLicense on a license in the documented format', async () => {
  const kw = new Keyward({ baseUrl, token: 'kw_x', publicKey: publicKey.export({ format: 'pem', type: 'spki' }).toString(), productId: 'prod_N', storage: memoryStorage() })
  const fp = await kw.fingerprint()
  assert.match(fp, /^[0-9a-f]{64}$/)
  assert.equal(await new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: memoryStorage() }).fingerprint(), fp)

  const now = Date.now()
  const payload = { v: 1, id: 'lic_1', account_id: 'acct_1', key_id: 'key_1', product_id: 'prod_N', plan: null, device_fingerprint: fp, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3600_000).toISOString(), entitlements: { export: true } }
  const enc = Buffer.from(JSON.stringify(payload)).toString('base64')
  const sig = sign(null, Buffer.from(`license/${enc}`), privateKey).toString('base64')
  const outer = Buffer.from(JSON.stringify({ enc, sig, alg: 'base64+ed25519', kid })).toString('base64')
  const text = `-----BEGIN KEYWARD LICENSE-----\n${outer.match(/.{1,64}/g).join('\n')}\n-----END KEYWARD LICENSE-----\n`
  const result = await kw.verifyLicense(text)
  assert.equal(result.valid, true)
  assert.deepEqual(result.license, payload)
  assert.deepEqual([result.has('export'), result.entitlement('export'), result.has('sso')], [true, true, false])
  const forged = text.replace(/[A-Za-z](?=[^\n]*\n-----END)/, (c) => (c === 'A' ? 'B' : 'A'))
  assert.equal((await kw.verifyLicense(forged)).valid, false)
})

test('air-gapped activation with Node\'s WebCrypto: request (file mode 0600), response, deactivation code verified with the device key, QR text', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyward-node-airgap-'))
  try {
    const path = join(dir, 'state.json')
    const kw = new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: fileStorage(path), fingerprint: 'c'.repeat(64), fetch: async () => { throw new TypeError('no network') } })
    const code = await kw.offlineActivationRequest({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' })
    assert.equal(statSync(path).mode & 0o777, 0o600)
    assert.ok(qrText(code).includes('█'))
    const request = JSON.parse(Buffer.from(code.slice('KWREQ1.'.length), 'base64url').toString('utf8'))
    const now = Date.now()
    const payload = { v: 2, kid, id: 'olic_1', account_id: 'acct_1', key_id: 'key_1', product_id: 'prod_N', plan: null, device_fingerprint: request.device_fingerprint, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3600_000).toISOString(), activation_id: 'act_1', device_public_key: request.device_public_key, request_nonce: request.nonce }
    const license = (over = {}) => {
      const enc = Buffer.from(JSON.stringify({ ...payload, ...over })).toString('base64')
      const outer = Buffer.from(JSON.stringify({ enc, sig: sign(null, Buffer.from(`license/${enc}`), privateKey).toString('base64'), alg: 'base64+ed25519', kid })).toString('base64')
      return `KWRES1.${Buffer.from(`-----BEGIN KEYWARD LICENSE-----\n${outer}\n-----END KEYWARD LICENSE-----\n`).toString('base64url')}`
    }
    await assert.rejects(kw.activateOffline(license({ request_nonce: 'x'.repeat(32) })), (e) => e instanceof OfflineResponseError && e.reason === 'wrong_request')
    assert.equal((await kw.activateOffline(license())).valid, true)
    assert.equal((await kw.verifyLicense()).valid, true)
    const deactivation = await kw.offlineDeactivationRequest()
    const [head, body, sig] = deactivation.split('.')
    const devicePublic = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: request.device_public_key }, format: 'jwk' })
    assert.equal(verify(null, Buffer.from(`${head}.${body}`), devicePublic, Buffer.from(sig, 'base64url')), true)
    assert.equal((await kw.verifyLicense()).valid, false)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('machineIdentity under Node: the client\'s fingerprint and components, salted hashes only, KEYWARD_MACHINE_ID alone when set', async () => {
  const id = await machineIdentity({ productId: 'prod_N' })
  const kw = new Keyward({ baseUrl, token: 'kw_x', publicKey: raw, productId: 'prod_N', storage: memoryStorage() })
  assert.equal(await kw.fingerprint(), id.fingerprint)
  assert.deepEqual(await kw.components(), id.components)
  assert.ok(Object.keys(id.components).length >= 1)
  for (const hash of Object.values(id.components)) assert.match(hash, /^[0-9a-f]{64}$/)
  const { hostname } = await import('node:os')
  assert.equal(JSON.stringify(id).includes(hostname()), false)
  const container = await machineIdentity({ productId: 'prod_N', system: { env: (n) => (n === 'KEYWARD_MACHINE_ID' ? 'node-pod-1' : null) } })
  assert.deepEqual([container.basis, Object.keys(container.components)], ['container', ['container']])
})

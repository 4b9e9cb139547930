// The built package (dist/) in headless Chromium: a page on one origin imports it and calls a real
// Keyward node on another origin (CORS: the preflight, and the exposed Keyward-Signature header), so
// signature verification runs on the browser's own WebCrypto Ed25519 against the node's genuine
// answers: validate, a refusal, a signed 403, the devices screen, deactivate, and a genuine answer
// altered on the way refused. Against the fake signing server on a third origin: a forged answer is
// refused, the fingerprint falls back to a random id kept in localStorage, and grace works from it;
// air-gapped activation runs on the browser's WebCrypto (device key made, kept in localStorage, signing).
import { expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join, normalize } from 'node:path'
import { useChromium } from '../support/chromium'
import { newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { startFakeServer, type FakeServer } from '../../client/test/support/fake-server'
import { graceSlot } from '../../client/test/support/grace-slot'

setDefaultTimeout(120_000)
const h = useHarness()
const ROOT = join(import.meta.dir, '..', '..', 'client')
const DIST = join(ROOT, 'dist')

let fake: FakeServer
let site: ReturnType<typeof Bun.serve>
const chromium = await useChromium('client/browser', {
  setUp: async () => {
    // Build the package exactly as it is published.
    const tsc = join(ROOT, '..', 'node_modules', '.bin', 'tsc')
    const built = Bun.spawnSync([tsc, '-p', join(ROOT, 'tsconfig.json')], { stdout: 'pipe', stderr: 'pipe' })
    if (built.exitCode !== 0) throw new Error(`client build failed: ${built.stdout.toString()}${built.stderr.toString()}`)
    fake = startFakeServer()
    site = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch(req) {
        const path = new URL(req.url).pathname
        if (path === '/') return new Response('<!doctype html><title>licensed web app</title><p>app</p>', { headers: { 'content-type': 'text/html' } })
        const file = normalize(join(DIST, path.replace(/^\/dist\//, '')))
        if (!path.startsWith('/dist/') || !file.startsWith(DIST) || !existsSync(file)) return new Response('not found', { status: 404 })
        return new Response(readFileSync(file), { headers: { 'content-type': 'text/javascript' } })
      },
    })
  },
  tearDown: async () => {
    site?.stop(true)
    await fake?.stop()
  },
})
const present = chromium.present

test.skipIf(!present)('in Chromium: validate across origins is verified, forgeries refused, grace and fingerprint from localStorage', async () => {
  const page = await chromium.browser.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`http://127.0.0.1:${site.port}/`)
  expect(new URL(fake.url).origin).not.toBe(`http://127.0.0.1:${site.port}`)
  const out = await page.evaluate(
    async ({ api, publicKey, slot }) => {
      const { Keyward, SignatureError } = await import('/dist/index.js' as string)
      const make = () => new Keyward({ baseUrl: api, token: 'kw_test', publicKey, productId: 'prod_web', backoffMs: 1, retries: 0 })
      const kw = make()
      const fingerprint = await kw.fingerprint()
      const again = await make().fingerprint()
      const first = await kw.validate({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', deviceName: 'browser' })
      return {
        fingerprint,
        again,
        deviceId: localStorage.getItem('keyward:device-id'),
        stored: localStorage.getItem(`keyward:${slot}`) !== null,
        first: { valid: first.valid, plan: first.plan, offline: first.offline },
        userAgent: navigator.userAgent,
        hasSignatureError: typeof SignatureError === 'function',
      }
    },
    { api: fake.url, publicKey: fake.publicKeyRaw, slot: graceSlot('ABCDE-FGHJK-MNPQR-STVWX-YZ012', 'prod_web') },
  )
  expect(errors).toEqual([])
  expect(out.userAgent).toContain('Chrome')
  expect(out.first).toEqual({ valid: true, plan: 'pro', offline: false })
  expect(out.fingerprint).toMatch(/^[0-9a-f]{64}$/)
  expect(out.again).toBe(out.fingerprint)
  expect(out.deviceId).toMatch(/^random:[0-9a-f]{64}$/)
  expect(out.stored).toBe(true)
  expect(fake.requests.find((r) => r.path === '/v1/validate')?.body.device_fingerprint).toBe(out.fingerprint)
  // The browser subset of machineIdentity() (client/README.md, "Machine identity"): the stored id, the user agent, the platform.
  const sent = fake.requests.find((r) => r.path === '/v1/validate')?.body.components as Record<string, string>
  expect(Object.keys(sent).sort()).toEqual(['browser_id', 'platform', 'user_agent'])
  expect(JSON.stringify(sent).includes(out.deviceId!.slice(7))).toBe(false)

  // A forged answer is an error in the browser too (a key with no stored answer); for the stored key it
  // counts as no answer, as the service going away does: grace from localStorage.
  const run = (mode: string, key = 'ABCDE-FGHJK-MNPQR-STVWX-YZ012') =>
    page.evaluate(
      async ({ api, publicKey, key }) => {
        const { Keyward } = await import('/dist/index.js' as string)
        const kw = new Keyward({ baseUrl: api, token: 'kw_test', publicKey, productId: 'prod_web', backoffMs: 1, retries: 0 })
        try {
          const r = await kw.validate({ key })
          return { valid: r.valid, offline: r.offline }
        } catch (e: any) {
          return { error: e.code, name: e.name }
        }
      },
      { api: fake.url, publicKey: fake.publicKeyRaw, key },
    ).then((r) => ({ mode, ...r }))
  fake.mode = 'wrong_key'
  expect(await run('wrong_key', 'ZZZZZ-FGHJK-MNPQR-STVWX-YZ012')).toEqual({ mode: 'wrong_key', error: 'bad_signature', name: 'SignatureError' })
  expect(await run('wrong_key')).toEqual({ mode: 'wrong_key', valid: true, offline: true })
  fake.mode = 'down'
  expect(await run('down')).toEqual({ mode: 'down', valid: true, offline: true })
  fake.mode = 'ok'
  await page.close()
})

test.skipIf(!present)('in Chromium against a real node across origins: validate, refusal, signed 403, devices, deactivate verified by the browser', async () => {
  const { token } = await h.account()
  const validateToken = await scopedToken(h.call, token, 'validate')
  const readToken = await scopedToken(h.call, token, 'keys:read')
  const productId = (await newProduct(h.call, token)).id
  const key = (await newKey(h.call, token, productId, { plan: 'web', activation_limit: 2 })) as { id: string; key_value: string }
  const revoked = (await newKey(h.call, token, productId)) as { id: string; key_value: string }
  expect((await h.call('POST', `/v1/keys/${revoked.id}/revoke`, { token, body: {} })).status).toBe(200)
  const publicKey = (await h.call('GET', '/v1/offline/public-key', { token: validateToken })).body.public_key

  const page = await chromium.browser.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`http://127.0.0.1:${site.port}/`)
  expect(new URL(h.node.url).origin).not.toBe(`http://127.0.0.1:${site.port}`)
  const out = await page.evaluate(
    async ({ api, validateToken, readToken, publicKey, productId, key, revokedKey, slot }) => {
      const { Keyward, memoryStorage } = await import('/dist/index.js' as string)
      const make = (opts: object = {}) => new Keyward({ baseUrl: api, token: validateToken, publicKey, productId, retries: 0, ...opts })
      const outcome = (p: Promise<any>) => p.then((r) => ({ valid: r.valid, reason: r.reason }), (e) => ({ name: e.name, code: e.code, status: e.status, signed: e.signed }))
      localStorage.clear()
      const kw = make()
      const first = await kw.validate({ key, deviceName: 'web app', appVersion: 'web-1' })
      const stored = localStorage.getItem(`keyward:${slot}`)
      const screen = await kw.devices()
      // The node's genuine answer with one byte changed on the way: the browser's own check refuses it
      // (a storage with no stored answer: with one, it would stand in, as when the service is away).
      const tampering = make({
        storage: memoryStorage(),
        fingerprint: await kw.fingerprint(),
        fetch: async (input: string, init: RequestInit) => {
          const res = await fetch(input, init)
          const text = (await res.text()).replace('"valid":true', '"valid": true')
          return new Response(text, { status: res.status, headers: res.headers })
        },
      })
      return {
        origin: location.origin,
        fingerprint: await kw.fingerprint(),
        first: { valid: first.valid, plan: first.plan, offline: first.offline, activationsUsed: first.activationsUsed, age: Date.now() - first.signedAt.getTime() },
        stored: stored === null ? null : JSON.parse(stored).path,
        devices: screen.devices.map((d: any) => ({ name: d.name, appVersion: d.appVersion, current: d.current })),
        refusal: await outcome(make().validate({ key: revokedKey })),
        forbidden: await outcome(make({ token: readToken }).validate({ key })),
        tampered: await outcome(tampering.validate({ key })),
        deactivated: await kw.deactivate(),
        storedAfter: localStorage.getItem(`keyward:${slot}`),
      }
    },
    { api: h.node.url, validateToken, readToken, publicKey, productId, key: key.key_value, revokedKey: revoked.key_value, slot: graceSlot(key.key_value, productId) },
  )
  expect(errors).toEqual([])
  expect(out.first).toMatchObject({ valid: true, plan: 'web', offline: false, activationsUsed: 1 })
  expect(Math.abs(out.first.age)).toBeLessThan(5 * 60_000)
  expect(out.stored).toBe('/v1/validate')
  expect(out.devices).toEqual([{ name: 'web app', appVersion: 'web-1', current: true }])
  expect(out.refusal).toEqual({ valid: false, reason: 'revoked' })
  expect(out.forbidden).toEqual({ name: 'KeywardError', code: 'insufficient_scope', status: 403, signed: true })
  expect(out.tampered).toMatchObject({ name: 'SignatureError', code: 'bad_signature' })
  expect(out.deactivated).toEqual({ deactivated: true, activationsUsed: 0, activationLimit: 2 })
  expect(out.storedAfter).toBeNull()
  // What the node recorded: the page's device (the browser fingerprint), its name and version, released by the user.
  const detail = (await h.call('GET', `/v1/keys/${key.id}`, { token })).body
  expect(detail.activations).toHaveLength(1)
  expect(detail.activations[0]).toMatchObject({
    device_fingerprint: out.fingerprint,
    device_name: 'web app',
    app_version: 'web-1',
    status: 'deactivated',
    deactivation_reason: 'user',
  })
  await page.close()
})

test.skipIf(!present)('in Chromium: air-gapped activation with the browser\'s WebCrypto (device key in localStorage), response accepted, deactivation code signed', async () => {
  const page = await chromium.browser.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`http://127.0.0.1:${site.port}/`)
  const options = { baseUrl: fake.url, token: 'kw_test', publicKey: fake.publicKeyRaw, productId: 'prod_web', retries: 0 }
  const request: string = await page.evaluate(async (o) => {
    const { Keyward } = await import('/dist/index.js' as string)
    return new Keyward(o).offlineActivationRequest({ key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012', deviceName: 'web kiosk' })
  }, options)
  const body = JSON.parse(Buffer.from(request.slice('KWREQ1.'.length), 'base64url').toString('utf8'))
  expect(body).toMatchObject({ v: 1, device_name: 'web kiosk' })
  // The service's answer (the fake signs an offline license for the request, as the node does).
  const now = Date.now()
  const license = fake.license({
    v: 2, kid: fake.kid, id: 'olic_web', account_id: 'acct_fake', key_id: 'key_1', product_id: 'prod_web', plan: null,
    device_fingerprint: body.device_fingerprint, issued_at: new Date(now - 1000).toISOString(), expires_at: new Date(now + 3_600_000).toISOString(),
    activation_id: 'act_web', device_public_key: body.device_public_key, request_nonce: body.nonce,
  })
  const out = await page.evaluate(
    async ({ o, response }) => {
      const { Keyward } = await import('/dist/index.js' as string)
      const kw = new Keyward(o) // a reload: the pending request and the device key come from localStorage
      const accepted = await kw.activateOffline(response)
      const verified = (await kw.verifyLicense()).valid
      const code: string = await kw.offlineDeactivationRequest()
      return { accepted: accepted.valid, verified, code, after: (await kw.verifyLicense()).valid, stored: Object.keys(localStorage).filter((k) => k.startsWith('keyward:air-gapped:')) }
    },
    { o: options, response: `KWRES1.${Buffer.from(license).toString('base64url')}` },
  )
  expect(errors).toEqual([])
  expect(out).toMatchObject({ accepted: true, verified: true, after: false, stored: ['keyward:air-gapped:prod_web'] })
  const [head, payload, sig] = out.code.split('.')
  const { createPublicKey, verify } = await import('node:crypto')
  const devicePublic = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: body.device_public_key }, format: 'jwk' })
  expect(verify(null, Buffer.from(`${head}.${payload}`), devicePublic, Buffer.from(sig!, 'base64url'))).toBe(true)
  await page.close()
})

// A fake Keyward for the client's tests: Bun.serve answering /v1/validate, /v1/devices and
// /v1/deactivate, signing every answer after authentication (errors and 5xx included) as docs/api.md
// "Signed answers" says (v3: the signer's kid inside, bound to the SHA-256 of the exact request body
// received) with a test root key or a signing key the root certified (then with `Keyward-Certificate`),
// serving the root-signed key set (GET /v1/offline/keys), sending the CORS headers, and able to
// misbehave on demand (forge, relabel, go away, 503, 429, an unsigned gateway 502, any error status).
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import { canonical } from './canonical'

export const ACCOUNT = 'acct_fake'

/** A signing key of the fake account (or of another one), certified by a root. */
export interface SigningKey {
  kid: string
  publicKeyRaw: string
  privateKey: KeyObject
  certificate: string
  state: 'pending' | 'active' | 'retired' | 'revoked'
  created_at: string
  activated_at: string | null
  revoked_at: string | null
}

export const kidOf = (raw: string) => createHash('sha256').update(Buffer.from(raw, 'base64')).digest('hex').slice(0, 32)
const b64url = (bytes: Buffer) => bytes.toString('base64url')

/** A KWCERT1 certificate (docs/api.md, "Signing keys") signed by `rootKey` over `KWCERT1.<payload>`. */
export function certify(rootKey: KeyObject, payload: { kid: string; public_key: string; account_id: string; created_at: string }): string {
  const body = `KWCERT1.${b64url(Buffer.from(JSON.stringify({ kid: payload.kid, public_key: payload.public_key, account_id: payload.account_id, created_at: payload.created_at })))}`
  return `${body}.${b64url(sign(null, Buffer.from(body, 'ascii'), rootKey))}`
}

/** A new Ed25519 signing key certified by `rootKey` for `account`. */
export function makeSigningKey(rootKey: KeyObject, account = ACCOUNT): SigningKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const publicKeyRaw = rawKey(publicKey)
  const kid = kidOf(publicKeyRaw)
  const created_at = new Date().toISOString()
  const certificate = certify(rootKey, { kid, public_key: publicKeyRaw, account_id: account, created_at })
  return { kid, publicKeyRaw, privateKey, certificate, state: 'pending', created_at, activated_at: null, revoked_at: null }
}

export type Mode =
  | 'ok'
  | 'wrong_key' // signed with another key
  | 'changed_body' // body altered after signing
  | 'wrong_nonce' // signed over another nonce
  | 'wrong_path' // signed over another path
  | 'stale' // t ten minutes ago
  | 'unsigned' // no Keyward-Signature
  | 'down' // 503 unavailable
  | 'error500'
  | 'rate_limited' // 429 with retry_after
  | 'gateway502' // an unsigned 502 with an HTML body, as a proxy in front would send
  | 'relabelled' // signed by the signer over `relabelAs`'s kid, sent under that kid and its certificate

export interface FakeServer {
  url: string
  /** The root's raw public key (what an app pins). */
  publicKeyRaw: string
  publicKeyPem: string
  /** The root's kid. */
  kid: string
  rootPrivateKey: KeyObject
  /** Who signs answers: null for the root, else a signing key (its certificate is sent along). */
  signer: SigningKey | null
  /** The signing keys in the key set, newest first. */
  keys: SigningKey[]
  /** Creates a signing key, listed in the key set as pending. */
  createKey(): SigningKey
  /** Makes the key the active signer (the previous active one retired). */
  activate(key: SigningKey): void
  /** Marks the key revoked; if it signed, the root signs again. */
  revoke(key: SigningKey): void
  /** The kid and certificate a `relabelled` answer claims. */
  relabelAs: SigningKey | null
  /** When set (a string, or null for none), sent as `Keyward-Certificate` instead of the signer's. */
  certificateOverride: string | null | undefined
  /** GET /v1/offline/keys: how many were asked, and how it answers. */
  keySetCalls: number
  keySetMode: 'ok' | 'down' | 'forged'
  /** Added to the server's clock (answers' `t`, the key set's `issued_at`): for tests that move the client's clock. */
  clockOffset: number
  /** The key set as served now (root-signed). */
  keySet(): Record<string, unknown>
  mode: Mode
  /** A scripted sequence of modes, used before `mode` (one per request). */
  script: Mode[]
  /** The answer for validate (`valid: true` by default). */
  validateAnswer: Record<string, unknown>
  retryAfter: number
  /** When set, every authenticated request is answered with this problem (signed as `mode` says). */
  errorAnswer: { status: number; code: string } | null
  requests: { path: string; nonce: string | null; body: any; auth: string | null }[]
  devices: { device_fingerprint: string; device_name: string | null }[]
  /** Signs an offline license (docs/api.md) with the root, or with `signer` (then its certificate is in the envelope). */
  license(payload: Record<string, unknown>, signer?: SigningKey | null): string
  stop(): Promise<void>
}

export function rawKey(publicKey: KeyObject): string {
  return Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64')
}

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'keyward-signature, keyward-certificate, x-request-id, retry-after',
}

export function startFakeServer(): FakeServer {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const other = generateKeyPairSync('ed25519').privateKey
  const kid = createHash('sha256').update(Buffer.from(rawKey(publicKey), 'base64')).digest('hex').slice(0, 32)
  let seq = 0
  const state: FakeServer = {
    url: '',
    publicKeyRaw: rawKey(publicKey),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    kid,
    rootPrivateKey: privateKey,
    signer: null,
    keys: [],
    createKey() {
      const key = makeSigningKey(privateKey)
      state.keys.unshift(key)
      return key
    },
    activate(key) {
      for (const k of state.keys) if (k.state === 'active') k.state = 'retired'
      key.state = 'active'
      key.activated_at = new Date().toISOString()
      state.signer = key
    },
    revoke(key) {
      key.state = 'revoked'
      key.revoked_at = new Date().toISOString()
      if (state.signer === key) state.signer = null
    },
    relabelAs: null,
    certificateOverride: undefined,
    keySetCalls: 0,
    keySetMode: 'ok',
    clockOffset: 0,
    keySet() {
      const unsigned = {
        root: { kid, public_key: rawKey(publicKey) },
        keys: state.keys.map((k) => ({ kid: k.kid, public_key: k.publicKeyRaw, state: k.state, certificate: k.certificate, created_at: k.created_at, activated_at: k.activated_at, revoked_at: k.revoked_at })),
        issued_at: new Date(Date.now() + state.clockOffset).toISOString(),
      }
      const signature = sign(null, Buffer.from(canonical(unsigned), 'utf8'), state.keySetMode === 'forged' ? other : privateKey).toString('base64url')
      return { ...unsigned, signature }
    },
    mode: 'ok',
    script: [],
    validateAnswer: { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 },
    retryAfter: 1,
    errorAnswer: null,
    requests: [],
    devices: [],
    stop: async () => server.stop(true),
    license(payload, signer = null) {
      const enc = Buffer.from(JSON.stringify(payload)).toString('base64')
      const sig = sign(null, Buffer.from(`license/${enc}`), signer?.privateKey ?? privateKey).toString('base64')
      const envelope = signer ? { enc, sig, alg: 'base64+ed25519', kid: signer.kid, certificate: signer.certificate } : { enc, sig, alg: 'base64+ed25519', kid }
      const outer = Buffer.from(JSON.stringify(envelope)).toString('base64')
      return `-----BEGIN KEYWARD LICENSE-----\n${outer.match(/.{1,64}/g)!.join('\n')}\n-----END KEYWARD LICENSE-----\n`
    },
  }

  function respond(path: string, nonce: string | null, status: number, body: unknown, mode: Mode, request: string, problem = false): Response {
    let text = JSON.stringify(body)
    const headers: Record<string, string> = {
      ...CORS,
      'content-type': problem ? 'application/problem+json' : 'application/json; charset=utf-8',
      'x-request-id': `req_fake${++seq}`,
    }
    if (status === 429) headers['retry-after'] = String(state.retryAfter)
    if (nonce && mode !== 'unsigned') {
      const t = (mode === 'stale' ? Date.now() - 10 * 60_000 : Date.now()) + state.clockOffset
      const signedPath = mode === 'wrong_path' ? '/v1/devices' : path
      const signedNonce = mode === 'wrong_nonce' ? `${nonce}x` : nonce
      const digest = createHash('sha256').update(request, 'utf8').digest('hex')
      const signer = state.signer
      const claimed = mode === 'relabelled' && state.relabelAs ? state.relabelAs : signer
      const claimedKid = claimed?.kid ?? kid
      const msg = Buffer.from(`keyward-answer/v3\n${claimedKid}\n${signedPath}\n${signedNonce}\n${t}\n${digest}\n${text}`, 'utf8')
      const sig = sign(null, msg, mode === 'wrong_key' ? other : (signer?.privateKey ?? privateKey)).toString('base64')
      headers['keyward-signature'] = `alg=ed25519, kid=${claimedKid}, t=${t}, sig=${sig}`
      const certificate = state.certificateOverride !== undefined ? state.certificateOverride : (claimed?.certificate ?? null)
      if (certificate !== null) headers['keyward-certificate'] = certificate
      if (mode === 'changed_body') text = text.replace('"valid":false', '"valid":true').replace('"plan":"pro"', '"plan":"ultimate"').replace('"detail":"fake', '"detail":"altered')
    }
    return new Response(text, { status, headers })
  }

  const problem = (status: number, code: string, extra: Record<string, unknown> = {}) => ({
    type: `https://keyward.dev/errors/${code}`,
    title: code,
    status,
    detail: `fake ${code}`,
    code,
    request_id: `req_fake_problem${seq}`,
    ...extra,
  })

  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const path = new URL(req.url).pathname
      if (req.method === 'OPTIONS') {
        return new Response(null, {
          status: 204,
          headers: {
            ...CORS,
            'access-control-allow-methods': 'POST, GET, OPTIONS',
            'access-control-allow-headers': 'authorization, content-type, keyward-nonce, x-request-id',
            'access-control-max-age': '86400',
          },
        })
      }
      if (req.method === 'GET' && path === '/v1/offline/keys') {
        state.keySetCalls++
        if (req.headers.get('authorization') !== 'Bearer kw_test') return new Response('{}', { status: 401 })
        if (state.keySetMode === 'down') return new Response('{}', { status: 503 })
        return Response.json(state.keySet(), { headers: CORS })
      }
      const nonce = req.headers.get('keyward-nonce')
      const request = await req.text()
      let body: any = {}
      try {
        body = JSON.parse(request)
      } catch {}
      state.requests.push({ path, nonce, body, auth: req.headers.get('authorization') })
      const mode = state.script.shift() ?? state.mode
      const answer = (status: number, json: unknown, m: Mode, problem = false) => respond(path, nonce, status, json, m, request, problem)
      if (nonce !== null && !/^[A-Za-z0-9_-]{16,128}$/.test(nonce)) return respond(path, null, 400, problem(400, 'invalid_request'), 'ok', request, true)
      if (req.headers.get('authorization') !== 'Bearer kw_test') return respond(path, null, 401, problem(401, 'unauthorized'), 'ok', request, true)
      if (mode === 'gateway502') return new Response('<html><body>502 Bad Gateway</body></html>', { status: 502, headers: { 'content-type': 'text/html' } })
      if (mode === 'down') return answer(503, problem(503, 'unavailable'), 'ok', true)
      if (mode === 'error500') return answer(500, problem(500, 'internal_error'), 'ok', true)
      if (mode === 'rate_limited') return answer(429, problem(429, 'rate_limited', { retry_after: state.retryAfter }), 'ok', true)
      if (state.errorAnswer) {
        const { status, code } = state.errorAnswer
        return answer(status, problem(status, code, status === 429 ? { retry_after: state.retryAfter } : {}), mode, true)
      }
      if (path === '/v1/validate') {
        if (state.validateAnswer.valid && !state.devices.some((d) => d.device_fingerprint === body.device_fingerprint)) {
          state.devices.push({ device_fingerprint: body.device_fingerprint, device_name: body.device_name ?? null })
        }
        return answer(200, state.validateAnswer, mode)
      }
      if (path === '/v1/devices') {
        return answer(200, {
          status: 'active',
          activation_limit: 3,
          activations_used: state.devices.length,
          deactivations_allowed: null,
          deactivations_used: 0,
          devices: state.devices.map((d) => ({ ...d, app_version: null, country: null, activated_at: '2026-11-24T00:00:00.000Z', last_validated_at: null })),
        }, mode)
      }
      if (path === '/v1/deactivate') {
        const before = state.devices.length
        state.devices = state.devices.filter((d) => d.device_fingerprint !== body.device_fingerprint)
        return answer(200, { deactivated: state.devices.length < before, activations_used: state.devices.length, activation_limit: 3 }, mode)
      }
      return answer(404, problem(404, 'not_found'), mode, true)
    },
  })
  state.url = `http://127.0.0.1:${server.port}`
  return state
}

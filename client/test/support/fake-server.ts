// A fake Keyward for the client's tests: Bun.serve answering /v1/validate, /v1/devices and
// /v1/deactivate, signing every answer after authentication (errors and 5xx included) as docs/api.md
// "Signed answers" says (v2: bound to the SHA-256 of the exact request body received) with a test
// Ed25519 key, sending the CORS headers, and able to misbehave on demand (forge, go away, 503, 429,
// an unsigned gateway 502, any error status).
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'

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

export interface FakeServer {
  url: string
  publicKeyRaw: string
  publicKeyPem: string
  kid: string
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
  /** Signs an offline license (API-2 §12) with the same key. */
  license(payload: Record<string, unknown>): string
  stop(): Promise<void>
}

export function rawKey(publicKey: KeyObject): string {
  return Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64')
}

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'keyward-signature, x-request-id, retry-after',
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
    mode: 'ok',
    script: [],
    validateAnswer: { valid: true, plan: 'pro', expires_at: null, activations_used: 1, activation_limit: 3 },
    retryAfter: 1,
    errorAnswer: null,
    requests: [],
    devices: [],
    stop: async () => server.stop(true),
    license(payload) {
      const enc = Buffer.from(JSON.stringify(payload)).toString('base64')
      const sig = sign(null, Buffer.from(`license/${enc}`), privateKey).toString('base64')
      const outer = Buffer.from(JSON.stringify({ enc, sig, alg: 'base64+ed25519', kid })).toString('base64')
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
      const t = mode === 'stale' ? Date.now() - 10 * 60_000 : Date.now()
      const signedPath = mode === 'wrong_path' ? '/v1/devices' : path
      const signedNonce = mode === 'wrong_nonce' ? `${nonce}x` : nonce
      const digest = createHash('sha256').update(request, 'utf8').digest('hex')
      const msg = Buffer.from(`keyward-answer/v2\n${signedPath}\n${signedNonce}\n${t}\n${digest}\n${text}`, 'utf8')
      const sig = sign(null, msg, mode === 'wrong_key' ? other : privateKey).toString('base64')
      headers['keyward-signature'] = `alg=ed25519, kid=${kid}, t=${t}, sig=${sig}`
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

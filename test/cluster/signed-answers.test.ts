// Three real node processes: signed answers (docs/api.md, "Signed answers") and CORS (§5) are the same on every node. An
// account whose signing key does not exist yet (one that predates offline licenses) gets one key, even
// when its first signed calls reach three nodes at once; every node's answers verify with the key that
// any node publishes. Verified with node:crypto alone, as an app would.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto'
import { newKey, newProduct, scopedToken } from '../support/harness'
import { fingerprint, pool, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/signed-answers')

const nonce = () => randomBytes(24).toString('base64url')

describe.if(ready)('three nodes: signed answers and CORS', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3)
  }, 60_000)
  afterAll(() => c?.close(), 60_000)

  async function post(node: number, path: string, token: string, body: unknown, n: string) {
    const sent = JSON.stringify(body)
    const res = await fetch(c.nodes[node]!.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'keyward-nonce': n },
      body: sent,
    })
    return { sent, status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) }
  }
  /** The signed message (docs/api.md, "Signed answers"): v3, over the signer's kid, the request body's SHA-256 and the answer's bytes. */
  const message = (kid: string, path: string, n: string, t: string, sent: string, bytes: Uint8Array) =>
    Buffer.concat([Buffer.from(`keyward-answer/v3\n${kid}\n${path}\n${n}\n${t}\n${createHash('sha256').update(sent).digest('hex')}\n`), bytes])
  const parts = (header: string | null) =>
    Object.fromEntries((header ?? '').split(', ').map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)])) as Record<string, string>

  test('first signed calls on three nodes at once: one key for the account, every answer verifies with it', async () => {
    const { id: accountId, token } = await c.account('growth')
    const validator = await scopedToken(c.call, token, 'validate')
    const product = await newProduct(c.call, token)
    const keys = await pool(Array.from({ length: 3 }), 3, () => newKey(c.call, token, product.id, { activation_limit: 5 }))
    // as if the account predated offline licenses: no signing key yet, on any node (none has loaded it)
    await c.sql`delete from signing_keys where account_id = ${accountId}`

    const calls = Array.from({ length: 30 }, (_, i) => ({
      node: i % 3,
      path: ['/v1/validate', '/v1/devices', '/v1/deactivate'][Math.floor(i / 3) % 3]!,
      key: keys[i % 3]!.key_value,
      device: fingerprint(i),
      n: nonce(),
    }))
    const answers = await Promise.all(
      calls.map((x) => post(x.node, x.path, validator, x.path === '/v1/devices' ? { key: x.key } : { key: x.key, device_fingerprint: x.device }, x.n)),
    )
    const stored = await c.sql<{ kid: string }[]>`select kid from signing_keys where account_id = ${accountId}`
    expect(stored).toHaveLength(1)

    // the key as each node publishes it: the same everywhere
    const published = await Promise.all(
      [0, 1, 2].map(async (node) => (await c.nodes[node]!.call('GET', '/v1/offline/public-key', { token: validator })).body),
    )
    for (const p of published) expect(p).toMatchObject({ kid: stored[0]!.kid, public_key_pem: published[0].public_key_pem })
    const publicKey = createPublicKey(published[0].public_key_pem)

    for (const [i, res] of answers.entries()) {
      const x = calls[i]!
      expect(res.status).toBe(200)
      expect(res.headers.get('access-control-allow-origin')).toBe('*')
      const s = parts(res.headers.get('keyward-signature'))
      expect(s).toMatchObject({ alg: 'ed25519', kid: stored[0]!.kid })
      expect(verify(null, message(s.kid!, x.path, x.n, s.t!, res.sent, res.bytes), publicKey, Buffer.from(s.sig!, 'base64'))).toBe(true)
      // the same bytes under another nonce, or for another request body, do not verify
      expect(verify(null, message(s.kid!, x.path, nonce(), s.t!, res.sent, res.bytes), publicKey, Buffer.from(s.sig!, 'base64'))).toBe(false)
      expect(verify(null, message(s.kid!, x.path, x.n, s.t!, `${res.sent} `, res.bytes), publicKey, Buffer.from(s.sig!, 'base64'))).toBe(false)
    }
  }, 120_000)

  test('a refusal and a problem answer are signed on every node; admin routes carry no CORS headers anywhere', async () => {
    const { token } = await c.account('growth')
    const validator = await scopedToken(c.call, token, 'validate')
    const product = await newProduct(c.call, token)
    const key = await newKey(c.call, token, product.id, { activation_limit: 1 })
    expect((await c.nodes[0]!.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
    const { public_key_pem } = (await c.nodes[2]!.call('GET', '/v1/offline/public-key', { token: validator })).body
    const publicKey = createPublicKey(public_key_pem)
    for (const node of [0, 1, 2]) {
      for (const [body, status] of [
        [{ key: key.key_value, device_fingerprint: fingerprint(node) }, 200], // revoked: a refusal
        [{ key: key.key_value }, 400], // no device: a problem
      ] as const) {
        const n = nonce()
        const res = await post(node, '/v1/validate', validator, body, n)
        expect(res.status).toBe(status)
        if (status === 200) expect(JSON.parse(new TextDecoder().decode(res.bytes))).toMatchObject({ valid: false, reason: 'revoked' })
        const s = parts(res.headers.get('keyward-signature'))
        expect(verify(null, message(s.kid!, '/v1/validate', n, s.t!, res.sent, res.bytes), publicKey, Buffer.from(s.sig!, 'base64'))).toBe(true)
      }
      const admin = await fetch(`${c.nodes[node]!.url}/v1/keys/${key.id}`, { headers: { authorization: `Bearer ${token}`, origin: 'https://app.example' } })
      expect(admin.status).toBe(200)
      expect(admin.headers.get('access-control-allow-origin')).toBeNull()
    }
  }, 120_000)
})

// Three real node processes on a private NATS server: a signing key's activation and revocation are in
// force on every node (answers and licenses) when the call returns (docs/operations.md, "How the nodes stay one service"), also
// while NATS is stopped and right after it restarts, and a scheduled activation switches every node at
// its time with no message. Every answer is checked the way an app holding only the pinned root does
// (test/support/signing.ts): the kid in its signature, verified through the certificate.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { newKey, scopedToken } from '../support/harness'
import { fingerprint, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'
import { envelopeOf } from '../support/offline'
import { answerSigner, rootKeyOf } from '../support/signing'
import { waitUntil } from '../support/wait'
import type { KeyObject } from 'node:crypto'

const ready = await requireCluster('cluster/signing-keys')

const DEGRADED_TTL_MS = 1500

describe.if(ready)('three nodes: every node signs with the signer of the moment', () => {
  let c: Cluster
  let accountId: string
  let token: string
  let appToken: string
  let keyValue: string
  let keyId: string
  let root: KeyObject
  let rootKid: string
  beforeAll(async () => {
    c = await startCluster(3, { privateNats: true, env: { DEGRADED_TTL_MS: String(DEGRADED_TTL_MS) } })
    const t = await c.tenant()
    ;({ accountId, token } = t)
    appToken = await scopedToken(c.call, token, 'validate')
    const key = await newKey(c.call, token, t.productId, { activation_limit: 1000 })
    keyValue = key.key_value
    keyId = key.id
    const pub = (await c.call('GET', '/v1/offline/public-key', { token })).body
    root = rootKeyOf(pub.public_key)
    rootKid = pub.kid
  }, 60_000)
  afterAll(() => c?.close(), 30_000)

  /** A signed validate on node `i`: the kid that signed it (null when it does not verify with the root). */
  async function signerOn(i: number): Promise<string | null> {
    const nonce = randomBytes(24).toString('base64url')
    const sent = JSON.stringify({ key: keyValue, device_fingerprint: fingerprint(i) })
    const res = await fetch(`${c.nodes[i]!.url}/v1/validate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${appToken}`, 'content-type': 'application/json', 'keyward-nonce': nonce },
      body: sent,
    })
    const bytes = new Uint8Array(await res.arrayBuffer())
    expect(res.status).toBe(200)
    return answerSigner({ root, rootKid, accountId }, res.headers, '/v1/validate', nonce, sent, bytes)
  }
  const signers = () => Promise.all(c.nodes.map((_, i) => signerOn(i)))
  /** The kid that signed a license issued on each node (its envelope's and its payload's, which must agree). */
  const licenseSigners = () =>
    Promise.all(
      c.nodes.map(async (node, i) => {
        const res = await node.call('POST', `/v1/keys/${keyId}/offline-licenses`, { token, body: { device_fingerprint: fingerprint(100 + i) } })
        expect(res.status).toBe(201)
        const envelope = envelopeOf(res.body.license)
        expect(res.body.payload.kid).toBe(envelope.kid)
        return envelope.kid
      }),
    )
  const create = async (node: number, body: unknown = {}) => {
    const res = await c.nodes[node]!.call('POST', '/v1/signing-keys', { token, body })
    expect(res.status).toBe(201)
    return res.body.kid as string
  }
  const activate = async (node: number, kid: string) => {
    const res = await c.nodes[node]!.call('POST', `/v1/signing-keys/${kid}/activate`, { token })
    expect(res.status).toBe(200)
  }
  const revoke = async (node: number, kid: string) => {
    const res = await c.nodes[node]!.call('POST', `/v1/signing-keys/${kid}/revoke`, { token, body: {} })
    expect(res.status).toBe(200)
  }
  const natsStates = async () => Promise.all(c.nodes.map(async (node) => (await node.call('GET', '/readyz')).body.nats))

  test('right after activate and revoke return, the answers of all three nodes carry the new signer', async () => {
    expect(await signers()).toEqual([rootKid, rootKid, rootKid]) // every node holds the account's signers
    const first = await create(0)
    expect(await signers()).toEqual([rootKid, rootKid, rootKid]) // created, not active
    await activate(1, first)
    expect(await signers()).toEqual([first, first, first])
    expect(await licenseSigners()).toEqual([first, first, first])
    const second = await create(2)
    await activate(2, second)
    expect(await signers()).toEqual([second, second, second])
    await revoke(0, second)
    expect(await signers()).toEqual([rootKid, rootKid, rootKid])
    expect(await licenseSigners()).toEqual([rootKid, rootKid, rootKid])
    await activate(1, first) // a retired key signs again
    expect(await signers()).toEqual([first, first, first])
  }, 60_000)

  test('NATS stopped, then right after its restart: every activation and revocation is in force on every node when it returns', async () => {
    const kids = [await create(0), await create(1), await create(2)]
    expect(await signers()).toHaveLength(3) // warm every node
    await c.nats.stop()
    try {
      await waitUntil(async () => (await natsStates()).every((s) => s === 'down'), 20_000, 'every node to see the bus down')
      await activate(0, kids[0]!)
      expect(await signers()).toEqual([kids[0], kids[0], kids[0]])
      await activate(1, kids[1]!)
      expect(await signers()).toEqual([kids[1], kids[1], kids[1]])
      await revoke(2, kids[1]!)
      expect(await signers()).toEqual([rootKid, rootKid, rootKid])
    } finally {
      await c.nats.start()
    }
    // right after the restart, before every node is back on the bus
    await activate(2, kids[2]!)
    expect(await signers()).toEqual([kids[2], kids[2], kids[2]])
    await waitUntil(async () => (await natsStates()).every((s) => s === 'ok'), 20_000, 'every node back on the bus')
    await activate(0, kids[0]!)
    expect(await signers()).toEqual([kids[0], kids[0], kids[0]])
    await revoke(1, kids[0]!)
    await revoke(1, kids[2]!)
    expect(await signers()).toEqual([rootKid, rootKid, rootKid])
  }, 90_000)

  test('a scheduled activation switches every node at its time, with no call at that moment', async () => {
    const before = await signers()
    const at = Date.now() + 3000
    const kid = await create(1, { activate_at: new Date(at).toISOString() })
    expect(await signers()).toEqual(before) // every node now holds the schedule, and has not switched
    while (Date.now() <= at) await Bun.sleep(25)
    expect(await signers()).toEqual([kid, kid, kid])
    // the sweeper (on whichever node) writes it down once
    await waitUntil(async () => {
      const [row] = await c.sql<{ state: string }[]>`select state from signers where kid = ${kid}`
      return row!.state === 'active'
    }, 20_000, 'the sweeper to record the activation')
    const events = await c.sql<{ actor_type: string }[]>`select actor_type from events where account_id = ${accountId}
      and type = 'signing_key.activated' and data->>'kid' = ${kid}`
    expect(events.map((e) => e.actor_type)).toEqual(['system'])
    expect(await signers()).toEqual([kid, kid, kid])
  }, 60_000)
})

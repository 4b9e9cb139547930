// Machine identity across three real nodes (docs/integrating.md, "Identifying machines"): a rebind is
// a seat change, exact under concurrency. Racing clones (one machine image, many fingerprints) and one
// new fingerprint sent to every node at once never leave two fingerprints valid on one seat: whatever
// answered valid during the race is, afterwards, either the seat's fingerprint or one it replaced
// (refused), on every node.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { newKey, newProduct } from '../support/harness'
import { fingerprint, startCluster, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/machine-identity')

const hash = () => randomBytes(32).toString('hex')
const machine = (): Record<string, string> => ({ machine_id: hash(), disk: hash(), board: hash(), mac: hash(), cpu: hash() })
const newFingerprint = () => randomBytes(32).toString('hex')

describe.if(ready)('machine identity across three nodes', () => {
  let c: Cluster
  beforeAll(async () => {
    c = await startCluster(3)
  }, 60_000)
  afterAll(() => c?.close())

  type Active = { id: string; device_fingerprint: string; replaced_fingerprints: string[] }
  const activeOf = (keyId: string) =>
    c.sql<Active[]>`select id, device_fingerprint, replaced_fingerprints from activations where key_id = ${keyId} and status = 'active' order by activated_at`

  /** Every node answers the seat's fingerprint valid and every other fingerprint that was valid device_mismatch. */
  async function oneValidPerSeat(token: string, keyValue: string, keyId: string, wereValid: string[], components: Record<string, string>) {
    const active = await activeOf(keyId)
    const current = new Set(active.map((a) => a.device_fingerprint))
    const replaced = new Set(active.flatMap((a) => a.replaced_fingerprints))
    for (const fp of wereValid) expect(current.has(fp) || replaced.has(fp), `${fp} was valid and is neither current nor replaced`).toBe(true)
    for (const node of c.nodes) {
      for (const fp of new Set([...wereValid, ...current])) {
        const res = await node.call('POST', '/v1/validate', { token, body: { key: keyValue, device_fingerprint: fp, components } })
        if (res.status !== 200) console.log(JSON.stringify(res.body), c.nodes.map((n) => n.output().split('\n').filter((l) => /rror/.test(l)).slice(-5).join('\n')).join('\n'))
        expect(res.status).toBe(200)
        if (current.has(fp)) expect(res.body.valid, `${node.url}: the seat's fingerprint`).toBe(true)
        else expect(res.body, `${node.url}: a replaced fingerprint`).toEqual({ valid: false, reason: 'device_mismatch' })
      }
    }
    // validating changed nothing: the same seats, the same fingerprints
    expect((await activeOf(keyId)).map((a) => a.device_fingerprint)).toEqual(active.map((a) => a.device_fingerprint))
  }

  test('racing clones of an activated machine: at most one wins the seat, the others are refused', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    for (let round = 0; round < 4; round++) {
      const key = await newKey(c.call, token, product.id, { activation_limit: 1, component_match: round % 2 ? 'most' : 'all' })
      const image = machine()
      const original = newFingerprint()
      // every node knows the key and the original machine (from memory) before the race
      for (const node of c.nodes) {
        const res = await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: original, components: image } })
        expect(res.body.valid).toBe(true)
      }
      const [seat] = await activeOf(key.id)
      const clones = Array.from({ length: 9 }, () => newFingerprint())
      const answers = await Promise.all(
        clones.map((fp, i) => c.nodes[i % 3]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fp, components: image } })),
      )
      if (!answers.every((a) => a.status === 200)) console.log(JSON.stringify(answers.map((a) => a.body)), c.nodes.map((n) => n.output().split("\n").filter((l) => /error|Error/.test(l)).slice(-5).join("\n")).join("\n"))
      expect(answers.every((a) => a.status === 200)).toBe(true)
      const valid = clones.filter((_, i) => answers[i]!.body.valid === true)
      for (const a of answers) if (a.body.valid !== true) expect(['device_mismatch', 'activation_limit']).toContain(a.body.reason)
      expect(valid.length, `round ${round}`).toBe(1)
      const after = await activeOf(key.id)
      expect(after.length).toBe(1)
      expect(after[0]!.id).toBe(seat!.id) // the same seat, rebound
      expect(after[0]!.device_fingerprint).toBe(valid[0]!)
      expect(after[0]!.replaced_fingerprints).toEqual([original])
      await oneValidPerSeat(token, key.key_value, key.id, [original, ...valid], image)
      const [{ n }] = await c.sql<{ n: number }[]>`select count(*)::int as n from events where type = 'activation.rebound' and data->>'key_id' = ${key.id}`
      expect(n).toBe(1)
    }
  }, 120_000)

  test('one new fingerprint sent to every node at once: one rebind, all answers for the same seat', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    for (let round = 0; round < 4; round++) {
      const key = await newKey(c.call, token, product.id, { activation_limit: 2, component_match: 'two' })
      const components = machine()
      const before = newFingerprint()
      for (const node of c.nodes) {
        expect((await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: before, components } })).body.valid).toBe(true)
      }
      // a reinstall: a new fingerprint, one component changed; sent to all three nodes at once, twice
      const reinstalled = newFingerprint()
      const now = { ...components, disk: hash() }
      const answers = await Promise.all(
        [0, 1, 2, 0, 1, 2].map((i) => c.nodes[i]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: reinstalled, components: now } })),
      )
      for (const a of answers) expect(a.status).toBe(200)
      // every valid answer is for the one seat; a loser may only be refused
      for (const a of answers) if (a.body.valid !== true) expect(a.body.reason).toBe('device_mismatch')
      expect(answers.some((a) => a.body.valid === true)).toBe(true)
      const after = await activeOf(key.id)
      expect(after.length).toBe(1)
      expect(after[0]!.device_fingerprint).toBe(reinstalled)
      expect(after[0]!.replaced_fingerprints).toEqual([before])
      await oneValidPerSeat(token, key.key_value, key.id, [before, reinstalled], now)
      const [{ n }] = await c.sql<{ n: number }[]>`select count(*)::int as n from events where type = 'activation.rebound' and data->>'key_id' = ${key.id}`
      expect(n).toBe(1)
    }
  }, 120_000)

  test('a clone pair racing for a free seat: one activation, the other refused', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    for (let round = 0; round < 4; round++) {
      const key = await newKey(c.call, token, product.id, { activation_limit: 3, component_match: 'any' })
      // every node holds the key (no device yet)
      const warm = newFingerprint()
      for (const node of c.nodes) await node.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: warm } })
      const image = machine()
      const pair = [newFingerprint(), newFingerprint(), newFingerprint()]
      const answers = await Promise.all(
        pair.map((fp, i) => c.nodes[i]!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: fp, components: image } })),
      )
      const valid = pair.filter((_, i) => answers[i]!.body.valid === true)
      for (const a of answers) if (a.body.valid !== true) expect(a.body.reason).toBe('device_mismatch')
      expect(valid.length).toBe(1)
      const after = await activeOf(key.id)
      expect(after.length).toBe(1)
      expect(after[0]!.device_fingerprint).toBe(valid[0]!)
      await oneValidPerSeat(token, key.key_value, key.id, valid, image)
    }
  }, 120_000)
})

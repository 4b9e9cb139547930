// The relay against a real Keyward node (needs the cloud side, docs/api.md "Relays"): relay request →
// POST /v1/keys/:id/relays → relay load (root from GET /v1/offline/public-key) → serve with
// UPSTREAM_URL and CHECK_IN_SECONDS=1 → check-ins renew the license → the SDK validates at the relay →
// the vendor deletes the relay (its seats return to the key) → the relay refuses within one check-in.
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import { newKey, useHarness } from '../support/harness'
import { relayCli, startRelay, tempDir, writeTemp, type RunningRelay } from '../support/relay'
import { vendorOn } from '../client/vendor'
import { Keyward, memoryStorage } from '../../client/src/index.ts'

setDefaultTimeout(120_000)
const h = useHarness()
const data = tempDir('relay-upstream-')
let relay: RunningRelay | null = null
afterAll(async () => {
  await relay?.stop('SIGKILL')
  rmSync(data, { recursive: true, force: true })
})

const FP = (n: number) => createHash('sha256').update(`upstream-device-${n}`).digest('hex')

describe('a relay licensed by a real node', () => {
  test('request → license → serve → check-in → delete upstream → refused within one check-in', async () => {
    const v = await vendorOn(h)
    const key = await newKey(h.call, v.token, v.productId, { activation_limit: 5 })
    const env = { KEYWARD_MACHINE_ID: 'machine-upstream' }
    const code = (await relayCli(['request', '--data', data, '--name', 'Lab'], env)).stdout.trim()
    const issued = await h.call('POST', `/v1/keys/${key.id}/relays`, { token: v.token, body: { request: code, seats: 2, lease_seconds: 60 } })
    expect(issued.status).toBe(201)
    const loaded = await relayCli(['load', writeTemp(data, 'relay.json', JSON.stringify(issued.body)), '--data', data, '--key', key.key_value, '--root', v.publicKey.raw], env)
    expect(loaded.stderr).toBe('')
    expect(loaded.code).toBe(0)
    // the key counts the relay's seats
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token: v.token })).body.activations_used).toBe(2)

    relay = await startRelay(data, { ...env, UPSTREAM_URL: h.node.url, CHECK_IN_SECONDS: '1' })
    const app = new Keyward({ baseUrl: relay.url, token: v.validateToken, rootPublicKey: v.publicKey.raw, fingerprint: FP(1), retries: 0, storage: memoryStorage(), keyId: key.id })
    expect(await app.validate({ key: key.key_value })).toMatchObject({ valid: true, activationLimit: 2, activationsUsed: 1 })
    // a check-in has been recorded upstream
    const deadline = Date.now() + 10_000
    let relays: any[] = []
    while (Date.now() < deadline) {
      relays = (await h.call('GET', `/v1/keys/${key.id}/relays`, { token: v.token })).body.data
      if (relays[0]?.last_check_in_at) break
      await Bun.sleep(200)
    }
    expect(relays[0]).toMatchObject({ id: issued.body.relay_id, seats: 2 })
    expect(relays[0].last_check_in_at).not.toBeNull()

    /** Validates until the answer is a refusal (at most 10 s: CHECK_IN_SECONDS is 1), or valid again when `valid`. */
    const until = async (valid: boolean) => {
      let answer: any
      const by = Date.now() + 10_000
      do {
        await Bun.sleep(250)
        answer = await app.validate({ key: key.key_value }).catch((e) => ({ error: String(e) }))
      } while (answer.valid !== valid && Date.now() < by)
      return answer
    }
    // suspended upstream: the relay answers the key's reason from its next check-in; reinstated: valid again
    expect((await h.call('POST', `/v1/keys/${key.id}/suspend`, { token: v.token, body: {} })).status).toBe(200)
    expect(await until(false)).toMatchObject({ valid: false, reason: 'suspended' })
    expect((await h.call('POST', `/v1/keys/${key.id}/reinstate`, { token: v.token, body: {} })).status).toBe(200)
    expect(await until(true)).toMatchObject({ valid: true })

    expect((await h.call('DELETE', `/v1/relays/${issued.body.relay_id}`, { token: v.token })).status).toBe(204)
    expect(await until(false)).toMatchObject({ valid: false, reason: 'revoked' })
    // its seats went back to the key
    expect((await h.call('GET', `/v1/keys/${key.id}`, { token: v.token })).body.activations_used).toBe(0)
  })
})

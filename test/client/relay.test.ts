// The SDK against a Keyward Relay, unchanged but for `baseUrl`: a real relay process (licensed by a test
// account's signing key, per the contract: test/support/relay.ts) answers, and the client verifies each
// answer through the two-link chain (the relay's certificate, then the signer's) to the pinned root.
// Refused: a relay licensed for another key (keyId), one whose license expired, one whose signer the
// account revoked (the key set says so), and a relay certificate not signed by the account.
import { afterAll, describe, expect, test } from 'bun:test'
import { createHash, sign } from 'node:crypto'
import { rmSync } from 'node:fs'
import canonicalize from 'canonicalize'
import { Keyward, memoryStorage, SignatureError, RevokedSignerError, type KeywardOptions } from '../../client/src/index.ts'
import { issueRelayLicense, KEY_VALUE, relayCli, startRelay, tempDir, testAccount, writeTemp, type RunningRelay } from '../support/relay'

const FP = (n: number) => createHash('sha256').update(`sdk-device-${n}`).digest('hex')
const account = testAccount()
const signer = account.signingKey()
const data = tempDir('relay-sdk-')
const env = { KEYWARD_MACHINE_ID: 'machine-sdk' }
const code = (await relayCli(['request', '--data', data], env)).stdout.trim()
const KEY_ID = 'key_01JSDKRELAYKEY0000000000000'
const license = issueRelayLicense(account, code, { signer, seats: 2, keyId: KEY_ID })
const expiresAt = Date.parse(JSON.parse(Buffer.from(license.relayCertificate.split('.')[1]!, 'base64url').toString()).scope.expires_at)
await relayCli(['load', writeTemp(data, 'l.lic', license.file), '--data', data, '--key', KEY_VALUE, '--root', account.root.publicKeyB64], env)
const relay: RunningRelay = await startRelay(data, env)
afterAll(async () => {
  await relay.stop('SIGKILL')
  rmSync(data, { recursive: true, force: true })
})

const client = (o: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: relay.url, token: 'kw_unused_on_a_relay', rootPublicKey: account.root.publicKeyB64, retries: 0, backoffMs: 1, storage: memoryStorage(), ...o })

const errorOf = (p: Promise<unknown>) => p.then(() => 'no error', (e) => e)

describe('the SDK with baseUrl at a relay', () => {
  test('validate, devices and deactivate verify through the chain to the pinned root', async () => {
    const c = client({ fingerprint: FP(1), keyId: KEY_ID })
    const r = await c.validate({ key: KEY_VALUE, deviceName: 'Lab PC 1' })
    expect(r).toMatchObject({ valid: true, activationsUsed: 1, activationLimit: 2 })
    const devices = await c.devices()
    expect(devices.devices.map((d) => [d.name, d.current])).toEqual([['Lab PC 1', true]])
    const off = await c.deactivate()
    expect(off.deactivated).toBe(true)
    // a refusal is signed too: a third machine when both seats are leased
    await client({ fingerprint: FP(2) }).validate({ key: KEY_VALUE })
    await client({ fingerprint: FP(3) }).validate({ key: KEY_VALUE })
    const refused = await client({ fingerprint: FP(4) }).validate({ key: KEY_VALUE })
    expect(refused).toMatchObject({ valid: false, reason: 'activation_limit' })
  })

  test('a relay licensed for another key is refused', async () => {
    const e = await errorOf(client({ fingerprint: FP(2), keyId: 'key_01JSOMEOTHERKEY00000000000' }).validate({ key: KEY_VALUE }))
    expect(e).toBeInstanceOf(SignatureError)
    expect((e as Error).message).toContain('licensed for another key')
  })

  test('a relay whose license expired is refused', async () => {
    // the device's clock past the relay's expiry (the answer's own time is checked after its signer)
    const e = await errorOf(client({ fingerprint: FP(2), now: () => expiresAt + 1000 }).validate({ key: KEY_VALUE }))
    expect(e).toBeInstanceOf(SignatureError)
    expect((e as Error).message).toContain('expired')
  })

  test('a relay certified by a signing key the account revoked is refused', async () => {
    const storage = memoryStorage()
    const revoked = {
      root: { kid: account.root.kid, public_key: account.root.publicKeyB64 },
      keys: [{ kid: signer.kid, public_key: signer.publicKeyB64, state: 'revoked', certificate: signer.certificate, created_at: new Date().toISOString(), activated_at: new Date().toISOString(), revoked_at: new Date().toISOString() }],
      issued_at: new Date().toISOString(),
    }
    const set = { ...revoked, signature: sign(null, Buffer.from(canonicalize(revoked)!, 'utf8'), account.root.privateKey).toString('base64') }
    await storage.set(`signing-keys:${account.root.kid}`, JSON.stringify({ set, fetched_at: Date.now() }))
    const e = await errorOf(client({ fingerprint: FP(2), storage }).validate({ key: KEY_VALUE }))
    expect(e).toBeInstanceOf(RevokedSignerError)
  })

  test("another account's root does not verify the relay", async () => {
    const e = await errorOf(client({ fingerprint: FP(2), rootPublicKey: testAccount().root.publicKeyB64 }).validate({ key: KEY_VALUE }))
    expect(e).toBeInstanceOf(SignatureError)
  })
})

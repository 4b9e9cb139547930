// A Node user's program compiled against the built package's declarations (dist/index.d.ts) with no
// DOM lib: only ES2022 and @types/node, strict, library checks on. .ci/run compiles it after the build.
import { ClockSkewError, Keyward, KeywardError, machineIdentity, memoryStorage, OfflineResponseError, SignatureError, type KeywardOptions, type MachineIdentity, type OfflineResponseRefusal, type Receipt, type ValidateResult } from '../../dist/index.js'

const options: KeywardOptions = { baseUrl: 'https://license.example.com', token: 'kw_x', publicKey: 'AAAA', storage: memoryStorage() }
const keyward = new Keyward(options)

export async function check(key: string): Promise<string> {
  try {
    const result: ValidateResult = await keyward.validate({ key, requireEntitlements: ['export'] })
    if (result.valid) return `licensed${result.offline ? ' (offline)' : ''}${result.has('export') ? `, export ${String(result.entitlement('export'))}` : ''}${result.expired ? ` until ${result.graceUntil?.toISOString()}` : ''}`
    return result.reason === 'entitlements_missing' ? `missing ${result.missing.join(', ')}` : result.reason
  } catch (err) {
    if (err instanceof ClockSkewError) return err.detail
    if (err instanceof SignatureError) return 'forged'
    if (err instanceof KeywardError) return err.code
    throw err
  }
}

/** Air-gapped activation as a Node app writes it: request, response, deactivation, receipt. */
export async function airGapped(key: string, response: string, receiptText: string): Promise<string> {
  const request: string = await keyward.offlineActivationRequest({ key, deviceName: 'lab', components: { machine_id: 'a'.repeat(64) } })
  try {
    const license = await keyward.activateOffline(response)
    const until: Date = license.expiresAt
    const activation: string = license.license.activation_id
    const code: string = await keyward.offlineDeactivationRequest()
    const receipt: Receipt = await keyward.verifyReceipt(receiptText)
    return `${request.length} ${activation} ${until.toISOString()} ${code.length} ${receipt.releasedAt.toISOString()}`
  } catch (err) {
    if (err instanceof OfflineResponseError) {
      const reason: OfflineResponseRefusal = err.reason
      return reason
    }
    throw err
  }
}

/** A container's identity: KEYWARD_MACHINE_ID, else the machine's parts. */
export async function identity(): Promise<string> {
  const id: MachineIdentity = await machineIdentity({ productId: 'prod_x' })
  const own = new Keyward({ ...options, fingerprint: id.fingerprint, components: id.components })
  return `${id.basis}: ${Object.keys(id.components).join(', ')} ${await own.fingerprint()}`
}

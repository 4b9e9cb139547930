// Air-gapped activation (docs/integrating.md, "Customers without a network"): a device that can never
// reach Keyward exchanges codes with the service through a person and a second, online machine.
//
//   KWREQ1.<b64url JSON {v: 1, key, device_fingerprint, components?, device_name?, device_public_key, nonce, t}>
//   KWRES1.<b64url of an offline license text>   (its payload adds activation_id, device_public_key, request_nonce, ...)
//   KWDEA1.<b64url JSON {v: 1, license_id, activation_id, device_fingerprint, t}>.<b64url Ed25519 by the device key>
//   KWRCP1.<b64url JSON {activation_id, license_id, released_at, kid}>.<b64url signature>[.<KWCERT1 of the signer>]
//
// Every signed text is `PREFIX.<payload>.<signature>` with the signature over the ASCII `PREFIX.<payload>`;
// everything inside is base64url without padding. The device key pair (Ed25519, WebCrypto) is made
// with the request and kept in the client's storage with it: its public half goes to the service
// inside the request, its private half signs the deactivation code, the proof that this device gave
// the seat back. Nothing here needs the network.
import { fromBase64Loose, fromUtf8, parseJsonText, randomBytes, toBase64Url, utf8 } from './encoding.js'
import { KeywardError } from './errors.js'
import { parseComponents, type ComponentMatch, type Components } from './component-match.js'
import type { LicensePayload, LicenseResult } from './license.js'
import type { KeywardStorage } from './storage.js'

export const REQUEST_PREFIX = 'KWREQ1.'
export const RESPONSE_PREFIX = 'KWRES1.'
export const DEACTIVATION_PREFIX = 'KWDEA1.'
export const RECEIPT_PREFIX = 'KWRCP1.'
/** A request code fits one QR code. */
export const MAX_REQUEST_CODE = 2048
/** A response carries a license text (at most 16 KiB) in base64url. */
const MAX_RESPONSE_CODE = RESPONSE_PREFIX.length + Math.ceil((16 * 1024 * 4) / 3) + 4
const MAX_RECEIPT = 4096

export interface OfflineActivationInput {
  /** The license key the user typed. */
  key: string
  /** This machine's components (`{name: sha256 hex}`, 1..16), as validate takes them. */
  components?: Readonly<Record<string, string>>
  /** The holder's label for this device, shown on their devices list and the vendor's console. */
  deviceName?: string
}

/** Why `activateOffline` refused a response code (`OfflineResponseError.reason`). */
export type OfflineResponseRefusal =
  | 'malformed' // not a KWRES1 code, or its license text is unreadable
  | 'no_pending_request' // this device has no request waiting for a response
  | 'bad_signature' // not signed by the account (chain to the pinned root), or altered
  | 'signing_key_revoked'
  | 'wrong_request' // the answer to another request (its nonce is not the pending one's)
  | 'wrong_device' // for another fingerprint or another device key
  | 'wrong_product'
  | 'expired'
  | 'clock_set_back'
  | 'device_mismatch' // the license's components do not match this machine's under its rule

/** A response code that this device cannot accept: `reason` says why; nothing was stored. */
export class OfflineResponseError extends KeywardError {
  readonly reason: OfflineResponseRefusal
  constructor(reason: OfflineResponseRefusal, detail: string) {
    super({ code: 'offline_response_refused', detail })
    this.name = 'OfflineResponseError'
    this.reason = reason
  }
}

/** A verified receipt: the service released this activation's seat at `releasedAt`. */
export interface Receipt {
  activationId: string
  licenseId: string
  releasedAt: Date
  /** The signer's kid (the root, or a signing key the root certified). */
  kid: string
}

/** The offline license stored by activateOffline, with what the service added for this device. */
export interface OfflineActivationPayload extends LicensePayload {
  activation_id: string
  device_public_key: string
  request_nonce: string
  components?: Record<string, string> | null
  component_match?: ComponentMatch
}

/** What the client keeps for air-gapped activation, one entry per product (JSON in the storage). */
interface State {
  v: 1
  device_fingerprint: string
  /** The device key pair: raw public key and PKCS#8 private key, both base64url. */
  public_key: string
  private_key: string
  /** The request waiting for its response (its code holds the key: shown again to its owner only). */
  pending?: { nonce: string; code: string; t: number }
  /** The accepted license and its ids. */
  license?: { text: string; id: string; activation_id: string }
  /** The last deactivation code, kept so it can be shown again until a new request starts. */
  deactivation?: string
}

export const stateName = (productId: string | undefined) => `air-gapped:${productId ?? ''}`

const encodeJson = (value: unknown) => toBase64Url(utf8(JSON.stringify(value)))

function decodeJson(part: string): any {
  const bytes = fromBase64Loose(part)
  if (!bytes) return null
  const value = parseJsonText(fromUtf8(bytes))
  return value && typeof value === 'object' && !Array.isArray(value) ? value : null
}

const sameKey = (a: string, b: string) => {
  const x = fromBase64Loose(a)
  const y = fromBase64Loose(b)
  return !!x && !!y && x.length === 32 && x.length === y.length && x.every((v, i) => v === y[i])
}

/** Components as the app gave them (the service's form, component-match.ts), or a TypeError naming the field. */
function checkComponents(components: unknown): Components | null {
  const parsed = parseComponents(components)
  if (!parsed.ok) throw new TypeError(`Keyward: ${parsed.field} ${parsed.detail}`)
  return parsed.components
}

export interface AirGapOptions {
  storage: KeywardStorage
  productId: string | undefined
  fingerprint: () => Promise<string>
  /** This machine's components (machine-identity.ts), sent when the call gives none. */
  components: () => Promise<Components | null>
  now: () => number
  /** Checks an offline license text on this device (license.ts, with the pinned root and no network). */
  checkLicense: (text: string) => Promise<LicenseResult>
  /** The signer's key for a receipt (the chain to the pinned root, no network). */
  keyFor: (kid: string, certificate: string | null) => Promise<object>
}

export class AirGap {
  private queue: Promise<unknown> = Promise.resolve()

  constructor(private readonly o: AirGapOptions) {}

  /** One change at a time: two quick calls cannot interleave their read and write of the state. */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.catch(() => {}).then(work)
    this.queue = run
    return run
  }

  private async read(): Promise<State | null> {
    const raw = await this.o.storage.get(stateName(this.o.productId))
    const state = raw ? parseJsonText(raw) : null
    if (!state || state.v !== 1 || typeof state.public_key !== 'string' || typeof state.private_key !== 'string' || typeof state.device_fingerprint !== 'string') return null
    return state as State
  }

  private write(state: State | null): Promise<void> | void {
    const name = stateName(this.o.productId)
    return state ? this.o.storage.set(name, JSON.stringify(state)) : this.o.storage.remove(name)
  }

  async request(input: OfflineActivationInput): Promise<string> {
    if (!input || typeof input.key !== 'string' || input.key.trim() === '') throw new TypeError('Keyward: offlineActivationRequest needs { key }')
    // The service's own limits (docs/api.md, "Air-gapped activation"), checked here: a code it would
    // refuse is found out now, not after the user carried it to another machine.
    if (input.key.trim().length > 256) throw new TypeError('Keyward: key must be at most 256 characters')
    if (input.deviceName !== undefined && (typeof input.deviceName !== 'string' || input.deviceName.length < 1 || input.deviceName.length > 100 || /[\u0000-\u001f\u007f]/.test(input.deviceName))) {
      throw new TypeError('Keyward: deviceName must be 1 to 100 characters, with no control characters')
    }
    const given = checkComponents(input.components)
    return this.serial(async () => {
      const fingerprint = await this.o.fingerprint()
      const components = input.components === undefined ? await this.o.components() : given
      const before = await this.read()
      // The device keeps one key pair while it holds a license or a request (a renewal of a held seat is
      // answered for the same activation, whose stored public key must stay this one); a fresh one otherwise.
      const keep = before && before.device_fingerprint === fingerprint && (before.license || before.pending) ? before : null
      const keys = keep ? { public_key: keep.public_key, private_key: keep.private_key } : await newDeviceKey()
      const nonce = toBase64Url(randomBytes(24)) // 32 url-safe characters
      const t = this.o.now()
      const body: Record<string, unknown> = { v: 1, key: input.key.trim(), device_fingerprint: fingerprint }
      if (components) body.components = components
      if (input.deviceName !== undefined) body.device_name = input.deviceName
      body.device_public_key = keys.public_key
      body.nonce = nonce
      body.t = t
      const code = REQUEST_PREFIX + encodeJson(body)
      if (code.length > MAX_REQUEST_CODE) {
        throw new KeywardError({ code: 'request_too_long', detail: `the request code would be ${code.length} characters, more than ${MAX_REQUEST_CODE} (one QR code): shorten deviceName or send fewer components` })
      }
      const state: State = { v: 1, device_fingerprint: fingerprint, ...keys, pending: { nonce, code, t } }
      if (keep?.license) state.license = keep.license
      await this.write(state)
      return code
    })
  }

  /** The pending request's code (to show it again), or null. */
  async pendingRequest(): Promise<string | null> {
    return (await this.read())?.pending?.code ?? null
  }

  /** The stored license text, or null. */
  async license(): Promise<string | null> {
    return (await this.read())?.license?.text ?? null
  }

  activate(response: string): Promise<LicenseResult & { valid: true; license: OfflineActivationPayload }> {
    return this.serial(async () => {
      const text = decodeResponse(response)
      const state = await this.read()
      if (!state?.pending) {
        // The same response again after it was accepted: already done.
        if (text !== null && state?.license?.text === text) {
          const again = await this.o.checkLicense(text)
          if (again.valid) return again as LicenseResult & { valid: true; license: OfflineActivationPayload }
        }
        throw new OfflineResponseError('no_pending_request', 'this device has no request waiting for a response: make a request code first')
      }
      if (text === null) throw new OfflineResponseError('malformed', 'not a response code (KWRES1.…)')
      const result = await this.o.checkLicense(text)
      if (!result.valid) {
        throw new OfflineResponseError(result.reason, `the response's license was refused: ${result.reason}`)
      }
      const payload = result.license as Partial<OfflineActivationPayload>
      if (typeof payload.request_nonce !== 'string' || payload.request_nonce !== state.pending.nonce) {
        throw new OfflineResponseError('wrong_request', 'this response answers another request code (not the one this device is waiting for)')
      }
      if (payload.device_fingerprint?.toLowerCase() !== state.device_fingerprint || typeof payload.device_public_key !== 'string' || !sameKey(payload.device_public_key, state.public_key)) {
        throw new OfflineResponseError('wrong_device', 'this response is for another device')
      }
      if (typeof payload.activation_id !== 'string') throw new OfflineResponseError('malformed', 'the response\'s license has no activation_id')
      await this.write({ v: 1, device_fingerprint: state.device_fingerprint, public_key: state.public_key, private_key: state.private_key, license: { text, id: payload.id!, activation_id: payload.activation_id } })
      return result as LicenseResult & { valid: true; license: OfflineActivationPayload }
    })
  }

  deactivate(): Promise<string> {
    return this.serial(async () => {
      const state = await this.read()
      if (!state?.license) {
        // Already deactivated here: the same code again (the seat is released once, however often it is sent).
        if (state?.deactivation) return state.deactivation
        throw new KeywardError({ code: 'not_activated_offline', detail: 'this device holds no license from an offline activation' })
      }
      const body = encodeJson({ v: 1, license_id: state.license.id, activation_id: state.license.activation_id, device_fingerprint: state.device_fingerprint, t: this.o.now() })
      const signed = `${DEACTIVATION_PREFIX}${body}`
      const key = await crypto.subtle.importKey('pkcs8', fromBase64Loose(state.private_key) as BufferSource, { name: 'Ed25519' }, false, ['sign'])
      const signature = new Uint8Array(await crypto.subtle.sign({ name: 'Ed25519' }, key, utf8(signed) as BufferSource))
      const code = `${signed}.${toBase64Url(signature)}`
      // The license, the pending request and the device key go; only the code stays, to be shown again.
      await this.write({ v: 1, device_fingerprint: state.device_fingerprint, public_key: state.public_key, private_key: '', deactivation: code })
      return code
    })
  }

  async verifyReceipt(receipt: string): Promise<Receipt> {
    const refused = (detail: string) => new KeywardError({ code: 'invalid_receipt', detail })
    const text = typeof receipt === 'string' ? receipt.replace(/\s+/g, '') : ''
    if (!text.startsWith(RECEIPT_PREFIX) || text.length > MAX_RECEIPT) throw refused('not a receipt (KWRCP1.…)')
    const parts = text.split('.')
    if (parts.length !== 3 && parts.length !== 6) throw refused('a receipt is KWRCP1.<payload>.<signature>[.<certificate>]')
    const payload = decodeJson(parts[1]!)
    const sig = fromBase64Loose(parts[2]!)
    if (!payload || !sig || sig.length !== 64 || typeof payload.kid !== 'string' || typeof payload.activation_id !== 'string' || typeof payload.license_id !== 'string' || typeof payload.released_at !== 'string' || !Number.isFinite(Date.parse(payload.released_at))) {
      throw refused('the receipt is malformed')
    }
    let key: object
    try {
      key = await this.o.keyFor(payload.kid, parts.length === 6 ? parts.slice(3).join('.') : null)
    } catch (err) {
      if (err instanceof KeywardError) throw err
      throw refused(`the receipt's signer is not vouched for by the pinned root: ${err instanceof Error ? err.message : String(err)}`)
    }
    const genuine = await crypto.subtle.verify({ name: 'Ed25519' }, key as CryptoKey, sig as BufferSource, utf8(`${parts[0]}.${parts[1]}`) as BufferSource).catch(() => false)
    if (!genuine) throw refused('the receipt\'s signature does not match it and the account\'s keys')
    return { activationId: payload.activation_id, licenseId: payload.license_id, releasedAt: new Date(payload.released_at), kid: payload.kid }
  }
}

/** The license text inside a response code (whitespace from wrapping or pasting ignored), or null. */
export function decodeResponse(response: unknown): string | null {
  if (typeof response !== 'string') return null
  const text = response.replace(/\s+/g, '')
  if (!text.startsWith(RESPONSE_PREFIX) || text.length > MAX_RESPONSE_CODE) return null
  const bytes = fromBase64Loose(text.slice(RESPONSE_PREFIX.length))
  if (!bytes) return null
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return null
  }
}

/** A fresh Ed25519 key pair: raw public key and PKCS#8 private key, base64url. */
async function newDeviceKey(): Promise<{ public_key: string; private_key: string }> {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair
  const raw = new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey))
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey('pkcs8', pair.privateKey))
  return { public_key: toBase64Url(raw), private_key: toBase64Url(pkcs8) }
}

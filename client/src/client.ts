// The Keyward client, the package's facade: signed validation with offline grace, the self-service
// device screen, a heartbeat for floating seats, the device's identity and offline license checks.
// The rooms behind it: transport.ts (HTTP, retries, verification), answers.ts (the wire mapping),
// grace.ts (the stored answers), air-gapped.ts (activation by exchanged codes), heartbeat.ts, signature.ts,
// signing-keys.ts (the root, certificates and the key set), license.ts, machine-identity.ts (fingerprint
// and components), component-match.ts, storage.ts.
import { AirGap, type OfflineActivationInput, type OfflineActivationPayload, type Receipt } from './air-gapped.js'
import { endsGrace, isRefusal, missingOf, toDeactivate, toDevices, toRefused, toValid, type DeactivateAnswer, type DeactivateResult, type DevicesAnswer, type DevicesResult, type ValidateAnswer, type ValidateResult } from './answers.js'
import { KeywardError, SignatureError, UnreachableError } from './errors.js'
import { parseComponents, type Components } from './component-match.js'
import { machineIdentity } from './machine-identity.js'
import { GraceStore } from './grace.js'
import { startHeartbeat, type Heartbeat, type HeartbeatOptions } from './heartbeat.js'
import { checkLicense, type LicenseResult } from './license.js'
import { importRoot, Trust, type KeySet, type Root } from './signing-keys.js'
import { defaultStorage, type KeywardStorage } from './storage.js'
import { Transport, type FetchLike } from './transport.js'

export type { FetchLike } from './transport.js'

export interface KeywardOptions {
  /** Where Keyward answers, e.g. `https://license.example.com`. */
  baseUrl: string
  /** An API token of scope `validate` (the only kind to ship inside an app). */
  token: string
  /**
   * The account's root public key, pinned in the app: `public_key` (raw, base64) or `public_key_pem`
   * from GET /v1/offline/public-key. It verifies answers and licenses signed by the root itself and,
   * through their certificates, by every signing key the root certifies (rotations need no app update).
   */
  rootPublicKey?: string | Uint8Array
  /** The earlier name of `rootPublicKey` (the same key: the account's key became its root); kept as an alias. */
  publicKey?: string | Uint8Array
  /** Your product's id: keys of other products answer not_found; also salts the fingerprint and names the stored answers. */
  productId?: string
  /** The license key value, if already known (validate() remembers the one it was given). */
  key?: string
  /**
   * The key's id (`key_...`), when the app knows it: an answer from a Keyward Relay whose license is for
   * another key is then refused (docs/integrating.md, "Floating seats on your customer's network").
   */
  keyId?: string
  /** Default: localStorage in browsers, memory elsewhere; `fileStorage(path)` keeps grace across restarts. */
  storage?: KeywardStorage
  /** How long the last verified valid answer may stand in for an unreachable service. Default 3 days. */
  graceSeconds?: number
  /** A fetch implementation (default: the global one), e.g. to add a proxy or for tests. */
  fetch?: FetchLike
  /** Per attempt. Default 10 s. */
  timeoutMs?: number
  /** Extra attempts after a network error or a 503. Default 3. */
  retries?: number
  /** First backoff delay; each retry doubles it, with full jitter, capped at 30 s. Default 500 ms. */
  backoffMs?: number
  /** On 429: false (default) throws RateLimitedError; true waits `retry_after` and tries again; a number waits at most that many seconds. */
  waitOnRateLimit?: boolean | number
  /**
   * Overrides the derived device fingerprint (64 hex). With your own fingerprint no components are sent
   * unless you pass them too (e.g. from machineIdentity()).
   */
  fingerprint?: string
  /**
   * The device's components (`{name: hash}`, 1..16) sent with validate, devices and this device's
   * deactivate, and checked against an offline license that carries them. Default: machineIdentity()'s
   * (salted with productId) when the fingerprint is derived; `false` sends none.
   * docs/integrating.md, "Identifying machines", says which `component_match` rule fits which machines.
   */
  components?: Record<string, string> | false
  /** The clock (ms since the epoch); tests inject one. */
  now?: () => number
  /** How the client waits (backoff, `retry_after`); default setTimeout. Tests inject one, an app may make waits cancellable. */
  sleep?: (ms: number) => Promise<void>
}

export interface ValidateInput {
  /** The license key (validate() remembers it for the next calls, devices() and deactivate()). */
  key?: string
  /** The holder's label for this device, e.g. "Alice's MacBook". */
  deviceName?: string
  appVersion?: string
  /** Entitlement codes this call needs (1..16), e.g. `['export']`: any the key lacks → `entitlements_missing` with `missing`. */
  requireEntitlements?: readonly string[]
  /**
   * Metered keys: the credits this call spends when valid (an integer 0..1,000,000; default 1 on the
   * service; 0 checks without spending). Ignored for unmetered keys. A metered call that spends (cost
   * above 0) never falls back to the stored answer: credits are only spent by the service.
   */
  cost?: number
}

export class Keyward {
  readonly baseUrl: string
  readonly productId: string | undefined
  readonly storage: KeywardStorage
  readonly graceSeconds: number
  private readonly root: Promise<Root>
  private readonly trust: Trust
  private readonly transport: Transport
  private readonly grace: GraceStore
  private readonly airGap: AirGap
  private readonly now: () => number
  private key: string | undefined
  private identityValue: Promise<{ fingerprint: string; components: Components | null }> | undefined
  private readonly fingerprintOption: string | undefined
  private readonly componentsOption: Components | false | undefined

  constructor(options: KeywardOptions) {
    const rootPublicKey = options?.rootPublicKey ?? options?.publicKey
    if (!options?.baseUrl || !options.token || !rootPublicKey) throw new TypeError('Keyward: baseUrl, token and rootPublicKey are required')
    if (options.rootPublicKey && options.publicKey && options.rootPublicKey !== options.publicKey) {
      throw new TypeError('Keyward: publicKey is the earlier name of rootPublicKey; pass one of them')
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.productId = options.productId
    this.key = options.key
    this.storage = options.storage ?? defaultStorage()
    this.graceSeconds = options.graceSeconds ?? 3 * 86_400
    this.now = options.now ?? Date.now
    if (options.fingerprint !== undefined) {
      if (!/^[0-9a-fA-F]{64}$/.test(options.fingerprint)) throw new TypeError('Keyward: fingerprint must be 64 hex characters')
      this.fingerprintOption = options.fingerprint.toLowerCase()
    }
    if (options.components !== undefined && options.components !== false) {
      const parsed = parseComponents(options.components)
      if (!parsed.ok) throw new TypeError(`Keyward: ${parsed.field} ${parsed.detail}`)
      this.componentsOption = parsed.components ?? false
    } else this.componentsOption = options.components
    this.root = importRoot(rootPublicKey)
    this.root.catch(() => {}) // reported by the first call that needs it
    this.transport = new Transport({
      baseUrl: this.baseUrl,
      token: options.token,
      trust: () => this.trust,
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      timeoutMs: options.timeoutMs ?? 10_000,
      retries: options.retries ?? 3,
      backoffMs: options.backoffMs ?? 500,
      waitOnRateLimit: options.waitOnRateLimit ?? false,
      now: this.now,
      sleep: options.sleep ?? sleep,
    })
    this.trust = new Trust({ root: this.root, storage: this.storage, fetchKeySet: () => this.transport.getJson('/v1/offline/keys'), now: this.now, keyId: options.keyId })
    this.grace = new GraceStore({
      storage: this.storage,
      resolve: (kid, certificate) => this.trust.keyFor(kid, certificate, 'offline'),
      graceSeconds: this.graceSeconds,
      productId: this.productId,
      now: this.now,
    })
    this.airGap = new AirGap({
      storage: this.storage,
      productId: this.productId,
      fingerprint: () => this.fingerprint(),
      components: () => this.components(),
      now: this.now,
      checkLicense: (text) => this.checkLicenseText(text, 'offline'),
      keyFor: (kid, certificate) => this.trust.keyFor(kid, certificate, 'offline'),
    })
  }

  /** This device's fingerprint (64 lower-case hex), derived once. */
  async fingerprint(): Promise<string> {
    return (await this.identity()).fingerprint
  }

  /** The components this client sends (`{name: hash}`), or null when it sends none; read once. */
  async components(): Promise<Components | null> {
    return (await this.identity()).components
  }

  private identity(): Promise<{ fingerprint: string; components: Components | null }> {
    this.identityValue ??= (async () => {
      const own = this.componentsOption
      // Only what is needed is read: an app with its own fingerprint and components spawns nothing.
      const derived = this.fingerprintOption === undefined || own === undefined ? await machineIdentity({ productId: this.productId, storage: this.storage }) : null
      const fingerprint = this.fingerprintOption ?? derived!.fingerprint
      const components = own === false ? null : (own ?? (this.fingerprintOption === undefined ? derived!.components : null))
      return { fingerprint, components }
    })()
    return this.identityValue
  }

  /**
   * Checks the license key on this device. Resolves with a verified answer (valid, or a refusal), or
   * with the stored valid answer marked `offline: true` when the service cannot be heard (no answer, a
   * 5xx, or an answer that is not verifiably the service's) and grace allows it. Throws KeywardError
   * otherwise (ClockSkewError when the device's clock is off).
   *
   * `requireEntitlements`: codes this call needs (1..16, sent as `require_entitlements`); any the key
   * lacks → `{ valid: false, reason: 'entitlements_missing', missing }` (nothing recorded). Offline,
   * the stored answer's entitlements are checked the same way (`offline: true` on that refusal).
   *
   * `cost` (metered keys): the credits the call spends when valid; the result carries
   * `creditsRemaining`, and a balance below the cost is `{ valid: false, reason: 'credits_exhausted',
   * creditsRemaining, refillsAt }`. A metered call with a cost above 0 (the default is 1) never falls
   * back to the stored answer: unreachable, it throws.
   */
  async validate(input: ValidateInput = {}): Promise<ValidateResult> {
    const key = input.key ?? this.key
    if (!key) throw new KeywardError({ code: 'no_key', detail: 'validate needs a license key (pass { key })' })
    const required = input.requireEntitlements ?? []
    if (!Array.isArray(required) || !required.every((code) => typeof code === 'string')) {
      throw new TypeError('Keyward: requireEntitlements must be an array of entitlement codes')
    }
    const cost = input.cost
    if (cost !== undefined && !(Number.isInteger(cost) && cost >= 0 && cost <= 1_000_000)) {
      throw new TypeError('Keyward: cost must be an integer from 0 to 1,000,000')
    }
    this.key = key
    const { fingerprint, components } = await this.identity()
    const lastSeen = await this.grace.touchClock()
    const body: Record<string, unknown> = { key, device_fingerprint: fingerprint }
    if (components) body.components = components
    if (input.appVersion !== undefined) body.app_version = input.appVersion
    if (input.deviceName !== undefined) body.device_name = input.deviceName
    if (this.productId) body.product_id = this.productId
    if (required.length > 0) body.require_entitlements = required // none asked: the field is left out (the service wants 1..16)
    if (cost !== undefined) body.cost = cost
    let answer
    try {
      answer = await this.transport.call('/v1/validate', body)
    } catch (err) {
      // Not heard from the service: no answer, a 5xx, or an answer nobody can vouch for (unsigned, forged,
      // an unsigned 401). A forger gains nothing a cut cable would not give: the stored answer stands in.
      if (err instanceof UnreachableError || err instanceof SignatureError || (err instanceof KeywardError && err.status === 401 && !err.signed)) {
        const stored = await this.grace.read(key, fingerprint, lastSeen)
        // A metered key's stored answer never stands in for a call that spends: only the service spends credits.
        const spends = stored !== null && stored.creditsRemaining !== null && (cost ?? 1) > 0
        if (stored && !spends) {
          // The stored answer may have been given to a call that asked for less: it unlocks what it lists, no more.
          const missing = missingOf(stored.entitlements, required)
          return missing.length > 0 ? toRefused({ valid: false, reason: 'entitlements_missing', missing }, true, stored.signedAt) : stored
        }
      }
      throw err
    }
    // A signed answer is the service's: its shape is the declared one (an unknown one is refused below).
    const json = answer.json as ValidateAnswer | null
    const signedAt = new Date(answer.signed.t)
    if (json?.valid === true) {
      await this.grace.save(key, answer.signed)
      return toValid(json, false, signedAt)
    }
    if (json?.valid === false && isRefusal(json.reason)) {
      if (endsGrace(json.reason)) await this.grace.forget(key, fingerprint)
      return toRefused(json, false, signedAt)
    }
    throw new KeywardError({ code: 'unexpected_answer', status: answer.status, detail: 'the validate answer has an unknown shape', requestId: answer.requestId, signed: true })
  }

  /** The key's active devices (oldest first), for a "manage devices" screen. */
  async devices(input: { key?: string } = {}): Promise<DevicesResult> {
    const key = this.keyOf(input.key)
    const { fingerprint, components } = await this.identity()
    const body: Record<string, unknown> = { key }
    if (this.productId) body.product_id = this.productId
    if (components) body.components = components
    const { json } = await this.transport.call('/v1/devices', body)
    return toDevices(json as DevicesAnswer, fingerprint)
  }

  /** Releases a device's seat: this device by default, or another of the key's devices (from devices()). */
  async deactivate(fingerprint?: string, input: { key?: string } = {}): Promise<DeactivateResult> {
    const key = this.keyOf(input.key)
    const { fingerprint: own, components } = await this.identity()
    const target = (fingerprint ?? own).toLowerCase()
    const body: Record<string, unknown> = { key, device_fingerprint: target }
    // This device's components go with its own release only: another device's are not known here.
    if (components && target === own) body.components = components
    const { json } = await this.transport.call('/v1/deactivate', body)
    // This device signed out: its stored answer must not keep it licensed offline.
    if (target === own) await this.grace.forget(key, own)
    return toDeactivate(json as DeactivateAnswer)
  }

  /**
   * Validates every `intervalSeconds` (a floating seat is held while beats arrive), one beat at a time;
   * `onLost` once when the seat is lost, then it stops.
   */
  heartbeat(options: HeartbeatOptions): Heartbeat {
    return startHeartbeat(() => this.validate({ deviceName: options.deviceName, appVersion: options.appVersion }), options)
  }

  /**
   * Checks an offline license text on this device (signature, device, product, expiry, clock), with
   * only the pinned root: a license signed by a signing key carries its certificate. A signer the
   * cached key set marks revoked is refused (`signing_key_revoked`: sync the license for a new one).
   * With no text: the license stored by `activateOffline` (`malformed` when there is none).
   */
  async verifyLicense(text?: string): Promise<LicenseResult> {
    if (text !== undefined) return this.checkLicenseText(text, 'online')
    // No text: the license this device got by air-gapped activation (docs/integrating.md, "Customers
    // without a network"), checked without the network (such a device has none to wait for): the
    // certificate beside the signature, and the cached key set if any, decide.
    return this.checkLicenseText((await this.airGap.license()) ?? '', 'offline')
  }

  /**
   * Air-gapped activation, step 1 (docs/integrating.md, "Customers without a network"): makes this
   * device's Ed25519 key pair and a request code, `KWREQ1.…` (at most 2,048 characters: one QR code;
   * `request_too_long` otherwise), kept pending in the storage with the key pair. The user carries it
   * to an online machine (the vendor's portal page, or the vendor's own page) and brings back the
   * response code. The code holds the license key: show it to its owner only. Needs no network.
   */
  offlineActivationRequest(input: OfflineActivationInput): Promise<string> {
    return this.airGap.request(input)
  }

  /** The pending request code (to show it again), or null when no request waits for its response. */
  pendingOfflineRequest(): Promise<string | null> {
    return this.airGap.pendingRequest()
  }

  /**
   * Air-gapped activation, step 2: checks a response code `KWRES1.…` (its license signed by the
   * account, through the chain to the pinned root; the answer to this device's pending request, for
   * this fingerprint and this device key) and stores its license; `verifyLicense()` with no argument
   * checks it from then on. Throws OfflineResponseError (`reason`) for a response it cannot accept,
   * storing nothing. Needs no network.
   */
  activateOffline(response: string): Promise<LicenseResult & { valid: true; license: OfflineActivationPayload }> {
    return this.airGap.activate(response)
  }

  /**
   * Gives an offline activation's seat back: deletes the stored license and pending request, and
   * returns the deactivation code `KWDEA1.<payload>.<signature>` signed by this device's key (the same
   * code again until a new request starts). The user carries it to an online machine, which answers a
   * receipt (`verifyReceipt`). Throws `not_activated_offline` when this device holds no such license.
   */
  offlineDeactivationRequest(): Promise<string> {
    return this.airGap.deactivate()
  }

  /** Checks a deactivation receipt `KWRCP1.…` (signed by the account, chain to the pinned root); throws `invalid_receipt` otherwise. */
  verifyReceipt(receipt: string): Promise<Receipt> {
    return this.airGap.verifyReceipt(receipt)
  }

  private async checkLicenseText(text: string, reach: 'online' | 'offline'): Promise<LicenseResult> {
    const clock = this.now()
    const lastSeen = await this.grace.touchClock()
    const root = await this.root
    return checkLicense(text, {
      rootKid: root.kid,
      // An air-gapped device never asks the network: the certificate beside the signature suffices.
      keyFor: (kid, certificate, asked, accountId) => this.trust.keyFor(kid, certificate, reach === 'offline' ? 'offline' : asked, accountId),
      fingerprint: await this.fingerprint(),
      components: await this.components(),
      productId: this.productId,
      clock,
      now: Math.max(clock, lastSeen),
    })
  }

  /**
   * The account's key set (GET /v1/offline/keys) as last fetched and verified against the root, or null
   * when none was fetched yet. `refresh: true` asks the service now (at most one request in flight).
   */
  async signingKeys(options: { refresh?: boolean } = {}): Promise<KeySet | null> {
    await this.root
    if (options.refresh) await this.trust.refresh()
    return this.trust.keySet()
  }

  private keyOf(key: string | undefined): string {
    const k = key ?? this.key
    if (!k) throw new KeywardError({ code: 'no_key', detail: 'no license key yet: call validate({ key }) or pass { key }' })
    return k
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

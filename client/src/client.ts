// The Keyward client: signed validation with offline grace, the self-service device screen, a
// heartbeat for floating seats, the device fingerprint and offline license checks.
import { fromUtf8, toBase64Url, randomBytes, sha256 } from './encoding.js'
import { KeywardError, RateLimitedError, SignatureError, UnreachableError } from './errors.js'
import { deriveFingerprint } from './fingerprint.js'
import { checkLicense, type LicenseResult } from './license.js'
import { importPublicKey, verifyAnswer, verifyStored, type SignedAnswer } from './signature.js'
import { defaultStorage, type KeywardStorage } from './storage.js'

export interface KeywardOptions {
  /** Where Keyward answers, e.g. `https://license.example.com`. */
  baseUrl: string
  /** An API token of scope `validate` (the only kind to ship inside an app). */
  token: string
  /** The account's Ed25519 public key: `public_key` (raw, base64) or `public_key_pem` from GET /v1/offline/public-key. */
  publicKey: string | Uint8Array
  /** Your product's id: keys of other products answer not_found; also salts the fingerprint. */
  productId?: string
  /** The license key value, if already known (validate() remembers the one it was given). */
  key?: string
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
  /** Overrides the derived device fingerprint (64 hex). */
  fingerprint?: string
  /** The clock (ms since the epoch); tests inject one. */
  now?: () => number
  /** How the client waits (backoff, `retry_after`); default setTimeout. Tests inject one, an app may make waits cancellable. */
  sleep?: (ms: number) => Promise<void>
}

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>

export type Refusal = 'not_found' | 'revoked' | 'expired' | 'activation_limit'
/** Refusals that end grace: the stored answer is forgotten. */
const DEFINITIVE: readonly string[] = ['not_found', 'revoked', 'expired', 'activation_limit']

export type ValidateResult =
  | {
      valid: true
      plan: string | null
      expiresAt: Date | null
      activationsUsed: number
      activationLimit: number
      /** True when this is the stored answer standing in for an unreachable service. */
      offline: boolean
      /** When the service signed this answer. */
      signedAt: Date
    }
  | { valid: false; reason: Refusal; offline: false; signedAt: Date }

export interface Device {
  fingerprint: string
  name: string | null
  appVersion: string | null
  country: string | null
  activatedAt: Date
  lastValidatedAt: Date | null
  /** This device (the caller's fingerprint). */
  current: boolean
}

export interface DevicesResult {
  status: 'active' | 'revoked' | 'expired'
  activationLimit: number
  activationsUsed: number
  deactivationsAllowed: number | null
  deactivationsUsed: number
  devices: Device[]
}

export interface DeactivateResult {
  deactivated: boolean
  activationsUsed: number
  activationLimit: number
}

export interface Heartbeat {
  /** Stops the heartbeat; resolves once no call is in flight. */
  stop(): Promise<void>
  readonly running: boolean
}

export interface HeartbeatOptions {
  intervalSeconds: number
  /** Called once when the seat is lost (a refusal, or no valid answer even with grace); the heartbeat then stops. */
  onLost: (why: { reason: Refusal } | { error: KeywardError }) => void
  /** Each answer (valid, possibly offline) after a beat. */
  onValid?: (result: ValidateResult & { valid: true }) => void
  deviceName?: string
  appVersion?: string
}

interface Answer {
  status: number
  json: any
  signed: SignedAnswer
  requestId: string | null
}

interface StoredGrace extends SignedAnswer {
  /** Which key and device the answer is for (also bound into the signed nonce). */
  binding: string
}

const ANSWER = 'answer'
const LAST_SEEN = 'last-seen'
const NONCE_RE = /^[A-Za-z0-9_-]{16,128}$/

export class Keyward {
  readonly baseUrl: string
  readonly productId: string | undefined
  readonly storage: KeywardStorage
  readonly graceSeconds: number
  private readonly token: string
  private readonly publicKeyPromise: Promise<CryptoKey>
  private readonly fetchImpl: FetchLike
  private readonly timeoutMs: number
  private readonly retries: number
  private readonly backoffMs: number
  private readonly waitOnRateLimit: boolean | number
  private readonly now: () => number
  private readonly sleep: (ms: number) => Promise<void>
  private key: string | undefined
  private fingerprintValue: Promise<string> | undefined
  /** The last key/device binding computed (the same one on every call of a running app). */
  private binding: { input: string; value: string } | undefined

  constructor(options: KeywardOptions) {
    if (!options?.baseUrl || !options.token || !options.publicKey) throw new TypeError('Keyward: baseUrl, token and publicKey are required')
    this.baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.token = options.token
    this.productId = options.productId
    this.key = options.key
    this.storage = options.storage ?? defaultStorage()
    this.graceSeconds = options.graceSeconds ?? 3 * 86_400
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
    this.timeoutMs = options.timeoutMs ?? 10_000
    this.retries = options.retries ?? 3
    this.backoffMs = options.backoffMs ?? 500
    this.waitOnRateLimit = options.waitOnRateLimit ?? false
    this.now = options.now ?? Date.now
    this.sleep = options.sleep ?? sleep
    if (options.fingerprint !== undefined) {
      if (!/^[0-9a-fA-F]{64}$/.test(options.fingerprint)) throw new TypeError('Keyward: fingerprint must be 64 hex characters')
      this.fingerprintValue = Promise.resolve(options.fingerprint.toLowerCase())
    }
    this.publicKeyPromise = importPublicKey(options.publicKey)
    this.publicKeyPromise.catch(() => {}) // reported by the first call that needs it
  }

  /** This device's fingerprint (64 lower-case hex), derived once. */
  fingerprint(): Promise<string> {
    this.fingerprintValue ??= deriveFingerprint(this.productId, this.storage)
    return this.fingerprintValue
  }

  /**
   * Checks the license key on this device. Resolves with a verified answer (valid, or a refusal), or
   * with the stored valid answer marked `offline: true` when the service cannot be reached and grace
   * allows it. Throws KeywardError for everything else (bad signature, 4xx, unreachable without grace).
   */
  async validate(input: { key?: string; deviceName?: string; appVersion?: string } = {}): Promise<ValidateResult> {
    const key = input.key ?? this.key
    if (!key) throw new KeywardError({ code: 'no_key', detail: 'validate needs a license key (pass { key })' })
    this.key = key
    const fingerprint = await this.fingerprint()
    const binding = await this.bindingOf(key, fingerprint)
    const lastSeen = await this.touchClock()
    const body: Record<string, unknown> = { key, device_fingerprint: fingerprint }
    if (input.appVersion !== undefined) body.app_version = input.appVersion
    if (input.deviceName !== undefined) body.device_name = input.deviceName
    if (this.productId) body.product_id = this.productId
    let answer: Answer
    try {
      answer = await this.signedCall('/v1/validate', body, binding)
    } catch (err) {
      if (err instanceof UnreachableError) {
        const stored = await this.grace(binding, lastSeen)
        if (stored) return stored
      }
      throw err
    }
    const json = answer.json
    const signedAt = new Date(answer.signed.t)
    if (json?.valid === true) {
      const grace: StoredGrace = { ...answer.signed, binding }
      await this.storage.set(ANSWER, JSON.stringify(grace))
      return toValid(json, false, signedAt)
    }
    if (json?.valid === false && DEFINITIVE.includes(json.reason)) {
      await this.forget(binding)
      return { valid: false, reason: json.reason, offline: false, signedAt }
    }
    throw new KeywardError({ code: 'unexpected_answer', status: answer.status, detail: 'the validate answer has an unknown shape', requestId: answer.requestId, signed: true })
  }

  /** The key's active devices (oldest first), for a "manage devices" screen. */
  async devices(input: { key?: string } = {}): Promise<DevicesResult> {
    const key = this.keyOf(input.key)
    const fingerprint = await this.fingerprint()
    const body: Record<string, unknown> = { key }
    if (this.productId) body.product_id = this.productId
    const { json } = await this.signedCall('/v1/devices', body, await this.bindingOf(key, fingerprint))
    return {
      status: json.status,
      activationLimit: json.activation_limit,
      activationsUsed: json.activations_used,
      deactivationsAllowed: json.deactivations_allowed ?? null,
      deactivationsUsed: json.deactivations_used ?? 0,
      devices: (json.devices ?? []).map((d: any) => ({
        fingerprint: d.device_fingerprint,
        name: d.device_name ?? null,
        appVersion: d.app_version ?? null,
        country: d.country ?? null,
        activatedAt: new Date(d.activated_at),
        lastValidatedAt: d.last_validated_at ? new Date(d.last_validated_at) : null,
        current: d.device_fingerprint === fingerprint,
      })),
    }
  }

  /** Releases a device's slot: this device by default, or another of the key's devices (from devices()). */
  async deactivate(fingerprint?: string, input: { key?: string } = {}): Promise<DeactivateResult> {
    const key = this.keyOf(input.key)
    const own = await this.fingerprint()
    const target = (fingerprint ?? own).toLowerCase()
    const binding = await this.bindingOf(key, own)
    const { json } = await this.signedCall('/v1/deactivate', { key, device_fingerprint: target }, binding)
    // This device signed out: its stored answer must not keep it licensed offline.
    if (target === own) await this.forget(binding)
    return { deactivated: json.deactivated === true, activationsUsed: json.activations_used, activationLimit: json.activation_limit }
  }

  /**
   * Validates every `intervalSeconds` (a floating seat is held while beats arrive). One beat at a
   * time: the next is scheduled only after the previous finished, so slow answers never overlap.
   */
  heartbeat(options: HeartbeatOptions): Heartbeat {
    if (!(options.intervalSeconds > 0)) throw new TypeError('heartbeat: intervalSeconds must be positive')
    let timer: ReturnType<typeof setTimeout> | undefined
    let inFlight: Promise<void> | undefined
    let running = true
    const finish = () => {
      running = false
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
    }
    const beat = async () => {
      timer = undefined
      try {
        const result = await this.validate({ deviceName: options.deviceName, appVersion: options.appVersion })
        if (!running) return
        if (result.valid) options.onValid?.(result)
        else {
          finish()
          options.onLost({ reason: result.reason })
        }
      } catch (err) {
        if (!running) return
        finish()
        options.onLost({ error: err instanceof KeywardError ? err : new KeywardError({ code: 'unexpected_error', detail: String(err), cause: err }) })
      }
    }
    const schedule = () => {
      if (!running) return
      timer = setTimeout(() => {
        inFlight = beat().finally(() => {
          inFlight = undefined
          schedule()
        })
      }, options.intervalSeconds * 1000)
    }
    schedule()
    return {
      get running() {
        return running
      },
      async stop() {
        finish()
        await inFlight
      },
    }
  }

  /** Checks an offline license text on this device (signature, device, product, expiry, clock). */
  async verifyLicense(text: string): Promise<LicenseResult> {
    const clock = this.now()
    const lastSeen = await this.touchClock()
    return checkLicense(text, {
      key: await this.publicKeyPromise,
      fingerprint: await this.fingerprint(),
      productId: this.productId,
      clock,
      now: Math.max(clock, lastSeen),
    })
  }

  private keyOf(key: string | undefined): string {
    const k = key ?? this.key
    if (!k) throw new KeywardError({ code: 'no_key', detail: 'no license key yet: call validate({ key }) or pass { key }' })
    return k
  }

  /** A short hash of key and device: put in every nonce, so a signed answer is bound to both. */
  private async bindingOf(key: string, fingerprint: string): Promise<string> {
    const normalized = key.trim().toUpperCase().replace(/-/g, '')
    const input = `keyward-binding/v1\n${normalized}\n${fingerprint}`
    if (this.binding?.input !== input) this.binding = { input, value: toBase64Url((await sha256(input)).slice(0, 15)) }
    return this.binding.value
  }

  /** Forgets the stored answer if it is the one of this key and device (another key's answer stays). */
  private async forget(binding: string): Promise<void> {
    const raw = await this.storage.get(ANSWER)
    if (raw === null) return
    let stored: Partial<StoredGrace> | null = null
    try {
      stored = JSON.parse(raw)
    } catch {}
    if (!stored || stored.binding === binding || typeof stored.binding !== 'string') await this.storage.remove(ANSWER)
  }

  /** Records the latest clock value seen and returns the one stored before (0 when none). */
  private async touchClock(): Promise<number> {
    const before = Number((await this.storage.get(LAST_SEEN)) ?? 0) || 0
    const now = this.now()
    if (now > before) await this.storage.set(LAST_SEEN, String(now))
    return before
  }

  /** The stored answer if it is genuine, for this key and device, young enough, and the clock never went back. */
  private async grace(binding: string, lastSeen: number): Promise<ValidateResult | null> {
    const raw = await this.storage.get(ANSWER)
    if (!raw) return null
    let stored: StoredGrace
    try {
      stored = JSON.parse(raw)
    } catch {
      return null
    }
    const now = this.now()
    if (stored?.binding !== binding || stored.path !== '/v1/validate' || !stored.nonce?.endsWith(binding)) return null
    if (now < lastSeen || now < stored.t - 5 * 60_000) return null // the clock went backwards
    if (now - stored.t > this.graceSeconds * 1000) return null
    if (!(await verifyStored(await this.publicKeyPromise, stored))) return null
    let json: any
    try {
      json = JSON.parse(stored.body)
    } catch {
      return null
    }
    return json?.valid === true ? toValid(json, true, new Date(stored.t)) : null
  }

  /** One signed POST with retries, timeouts and 429 handling; the answer's signature verified. */
  private async signedCall(path: string, body: unknown, binding: string): Promise<Answer> {
    const key = await this.publicKeyPromise
    const payload = JSON.stringify(body)
    for (let attempt = 0; ; attempt++) {
      const nonce = toBase64Url(randomBytes(18)) + binding
      if (!NONCE_RE.test(nonce)) throw new KeywardError({ code: 'internal', detail: 'nonce out of range' })
      let res: Response
      let bytes: Uint8Array
      try {
        ;({ res, bytes } = await this.post(path, payload, nonce))
      } catch (cause) {
        if (attempt < this.retries) {
          await this.backoff(attempt)
          continue
        }
        throw new UnreachableError({ detail: `no answer from ${this.baseUrl}${path}: ${describe(cause)}`, cause })
      }
      const requestId = res.headers.get('x-request-id')
      const header = res.headers.get('keyward-signature')
      if (res.status >= 500) {
        // 5xx: retry 503, then treat as unreachable (grace applies). Unsigned 5xx come from proxies too.
        if (res.status === 503 && attempt < this.retries) {
          await this.backoff(attempt)
          continue
        }
        const problem = parseJson(bytes)
        throw new UnreachableError({ status: res.status, detail: problem?.detail ?? `HTTP ${res.status}`, requestId })
      }
      if (res.status >= 400) {
        // Error answers are signed when the service had a valid request to sign for (not 401).
        let signed = false
        if (header) {
          await verifyAnswer(key, header, path, nonce, bytes, this.now(), requestId)
          signed = true
        }
        const problem = parseJson(bytes) ?? {}
        const init = {
          status: res.status,
          detail: typeof problem.detail === 'string' ? problem.detail : `HTTP ${res.status}`,
          requestId: problem.request_id ?? requestId,
          retryAfter: retryAfterOf(problem, res),
          signed,
        }
        if (res.status === 429) {
          const wait = init.retryAfter ?? 1
          const allowed = this.waitOnRateLimit === true ? Infinity : typeof this.waitOnRateLimit === 'number' ? this.waitOnRateLimit : -1
          if (wait <= allowed) {
            await this.sleep(wait * 1000)
            attempt = -1 // a rate-limit wait is not a failure: the retry budget starts again
            continue
          }
          throw new RateLimitedError(init)
        }
        throw new KeywardError({ code: typeof problem.code === 'string' ? problem.code : `http_${res.status}`, ...init })
      }
      const verified = await verifyAnswer(key, header, path, nonce, bytes, this.now(), requestId)
      const text = fromUtf8(bytes)
      const json = parseJsonText(text)
      if (json === null) throw new SignatureError('the signed answer is not JSON', requestId)
      return { status: res.status, json, requestId, signed: { path, nonce, t: verified.t, kid: verified.kid, sig: sigOf(header!), body: text } }
    }
  }

  private async post(path: string, payload: string, nonce: string): Promise<{ res: Response; bytes: Uint8Array }> {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new Error(`timed out after ${this.timeoutMs} ms`)), this.timeoutMs)
    try {
      const res = await this.fetchImpl(this.baseUrl + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json', 'keyward-nonce': nonce },
        body: payload,
        signal: controller.signal,
      })
      // The body is read under the same timeout: a server that stalls mid-answer is unreachable too.
      return { res, bytes: new Uint8Array(await res.arrayBuffer()) }
    } finally {
      clearTimeout(timer)
    }
  }

  private backoff(attempt: number): Promise<void> {
    const ceiling = Math.min(30_000, this.backoffMs * 2 ** attempt)
    return this.sleep(Math.random() * ceiling) // full jitter: clients that failed together do not retry together
  }
}

function toValid(json: any, offline: boolean, signedAt: Date): ValidateResult {
  return {
    valid: true,
    plan: json.plan ?? null,
    expiresAt: json.expires_at ? new Date(json.expires_at) : null,
    activationsUsed: json.activations_used,
    activationLimit: json.activation_limit,
    offline,
    signedAt,
  }
}

function parseJsonText(text: string): any {
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
  } catch {
    return null
  }
}

const parseJson = (bytes: Uint8Array) => parseJsonText(fromUtf8(bytes))

function retryAfterOf(problem: any, res: Response): number | null {
  if (Number.isFinite(problem?.retry_after)) return problem.retry_after
  const header = Number(res.headers.get('retry-after'))
  return res.headers.get('retry-after') !== null && Number.isFinite(header) ? header : null
}

const sigOf = (header: string) => /(?:^|,)\s*sig=([^,\s]+)/.exec(header)?.[1] ?? ''
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const describe = (err: unknown) => (err instanceof Error ? err.message : String(err))

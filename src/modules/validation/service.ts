// The validation engine: the contract's decision order over the hot state; the holder's routes
// (deactivate, devices) answered from it when the key is unknown. Seat changes themselves (a new
// device's claim, a holder's release) are the activations module's (modules/activations/service.ts):
// this engine decides the answer and calls it. Refusals are answers (values); exceptions are for
// failed requests (429, 503 when Postgres is needed and down).
import type { Deps } from '../../deps'
import { AppError } from '../../core/errors'
import { secondsToUtcMidnight } from '../../infra/counters'
import { portableKeyHash } from '../../infra/crypto'
import { DigestMemo } from '../../infra/digest-memo'
import { validateOutcomes } from '../../infra/metrics'
import { NO_PRODUCT, OUTCOME, ValidationCounts } from '../analytics/validation-counts'
import { DEVICE } from '../events/outbox'
import { PLAN_LIMITS } from '../../core/plans'
import type { Principal } from '../../core/principal'
import { missingEntitlements, type Entitlements } from '../../core/entitlements'
import { claimSeat, releaseByHolder } from '../activations/service'
import { HolderGate } from './holder-gate'
import { listDevices } from './devices'
import { applyPolicy, deviceCount, hasDevice, HotState, keyHashOf, type KeyRef, type KeyState } from './hot-state'
import { ImportedLookup, type Found } from './imported'
import { PolicyCache } from './policy-cache'
import { LastSeenWriter } from './last-seen'
import type { DeactivateAnswer, DeactivateBody, DevicesAnswer, DevicesBody, Reason, ValidateAnswer, ValidateBody } from './model'
import { loadKeyState } from './repo'
import { CreditLeases, type Spent, type SpentFrom } from './credit-leases'
import { expiryRefused, REFUSED, validAnswer, validAnswerOf, type Terms } from './answers'

/** Key value as sent → its hot-state key and the entry's object last answered, for recently validated keys (see infra/digest-memo.ts). */
const KNOWN_KEY_VALUES = 65_536

function rateLimited(limit: number | null): AppError {
  validateOutcomes.rate_limited.inc()
  return new AppError('rate_limited', `This account's daily limit of ${limit} validate calls is reached`, {
    retryAfter: secondsToUtcMidnight(),
  })
}

/** The node's metric for a refusal, and its frozen answer (the analytics are `recordRefusal`'s). */
function countedRefusal(reason: Reason): ValidateAnswer {
  validateOutcomes[reason].inc()
  return REFUSED[reason]
}

/**
 * The country a door read from the request's country header (COUNTRY_HEADER), when it is two letters
 * (upper-cased); anything else is not recorded. Only a new device's activation stores it.
 */
function countryOf(value: string | null): string | null {
  return value !== null && /^[A-Za-z]{2}$/.test(value) ? value.toUpperCase() : null
}

export class ValidationEngine {
  readonly hot: HotState
  /** Policies by id, beside the hot keys (policy-cache.ts). */
  readonly policies: PolicyCache
  readonly lastSeen: LastSeenWriter
  /** Answers by account, product, outcome and day, for the analytics (written by the flush job). */
  readonly outcomes: ValidationCounts
  /** This node's leases of metered keys' credits (credit-leases.ts). */
  readonly credits: CreditLeases
  /** Only values that can be keys are remembered (a guess that cannot be a key costs no memory). */
  private keyValues = new DigestMemo<KeyRef>(KNOWN_KEY_VALUES)
  /** Imported keys stored under their account-scoped or SHA-256 hash (imported.ts). */
  private imported: ImportedLookup
  /** POST /v1/devices and /v1/deactivate per account, on this node: rate and concurrency (holder-gate.ts). */
  private holders: HolderGate

  constructor(private deps: Deps) {
    const { config, sql, bus } = deps
    this.hot = new HotState(
      (hotKey) => loadKeyState(sql, keyHashOf(hotKey)),
      {
        ttlMs: config.cacheTtlMs,
        degradedTtlMs: config.degradedTtlMs,
        maxKeys: config.cacheMaxKeys,
        maxUnknownKeys: config.cacheMaxUnknownKeys,
        trusted: (now) => bus.trusted(now),
      },
      bus,
    )
    this.policies = new PolicyCache(
      sql,
      { ttlMs: config.cacheTtlMs, degradedTtlMs: config.degradedTtlMs, trusted: (now) => bus.trusted(now) },
      bus,
    )
    this.lastSeen = new LastSeenWriter(sql)
    this.outcomes = new ValidationCounts(sql)
    this.imported = new ImportedLookup(this.hot, sql, bus)
    this.credits = new CreditLeases(sql, bus, deps.log)
    this.holders = new HolderGate(config.holderRatePerSecond, config.holderRateBurst)
  }

  /** A refusal, recorded for the analytics (`productId` NO_PRODUCT when it belongs to none) and the metric. */
  private recordRefusal(accountId: string, productId: string, reason: Reason, now: number): ValidateAnswer {
    this.outcomes.record(accountId, productId, OUTCOME[reason], now)
    return countedRefusal(reason)
  }

  /** entitlements_missing: a refusal that names the codes, so it is built per answer. */
  private lacking(accountId: string, productId: string, missing: string[], now: number): ValidateAnswer {
    this.outcomes.record(accountId, productId, OUTCOME.entitlements_missing, now)
    validateOutcomes.entitlements_missing.inc()
    return { valid: false, reason: 'entitlements_missing', missing }
  }

  /** credits_exhausted: the balance left and the next refill, built per answer. */
  private exhausted(accountId: string, productId: string, spent: Spent & { ok: false }, now: number): ValidateAnswer {
    this.outcomes.record(accountId, productId, OUTCOME.credits_exhausted, now)
    validateOutcomes.credits_exhausted.inc()
    return { valid: false, reason: 'credits_exhausted', credits_remaining: spent.remaining, refills_at: spent.refillsAt }
  }

  /** A known device's valid answer for a metered key: its cost spent, or credits_exhausted. */
  private metered(who: Principal, body: ValidateBody, hotKey: string, state: KeyState, now: number): ValidateAnswer | Promise<ValidateAnswer> {
    const spent = this.credits.spend(hotKey, state.accountId, state.productId, body.cost ?? 1, now)
    const answer = (s: Spent, at: number): ValidateAnswer => {
      if (!s.ok) return this.exhausted(who.accountId, state.productId, s, at)
      this.lastSeen.record(hotKey, body.device_fingerprint.toLowerCase(), body.app_version ?? null, at, body.device_name)
      this.outcomes.record(who.accountId, state.productId, OUTCOME.valid, at)
      validateOutcomes.valid.inc()
      return validAnswer(state, deviceCount(state), at, s.remaining) // built per answer: the balance moves
    }
    return spent instanceof Promise ? spent.then((s) => answer(s, Date.now())) : answer(spent, now)
  }

  private limited(accountId: string, limit: number | null, now: number): AppError {
    this.outcomes.record(accountId, NO_PRODUCT, OUTCOME.rate_limited, now)
    return rateLimited(limit)
  }

  /**
   * POST /v1/validate after authentication and body validation; `country`: the raw value of the
   * request's country header, read by the door (null when absent).
   * Synchronous (no promise) when the quota answers from memory and the key is in the hot state:
   * the common case does no I/O and waits for nothing. One clock reading serves quota, expiry and last-seen.
   */
  validate(who: Principal, body: ValidateBody, country: string | null): ValidateAnswer | Promise<ValidateAnswer> {
    const now = Date.now()
    // Every call that passed request validation counts, valid or not; a refused (429) call does not.
    const limit = PLAN_LIMITS[who.plan]?.validationsPerDay ?? null
    const taken = this.deps.counters.take(who.accountId, limit, now)
    if (taken === true) return this.decide(who, body, country, now)
    if (taken === false) throw this.limited(who.accountId, limit, now)
    return taken.then((ok) => {
      if (!ok) throw this.limited(who.accountId, limit, Date.now())
      return this.decide(who, body, country, Date.now())
    })
  }

  private decide(who: Principal, body: ValidateBody, country: string | null, now: number): ValidateAnswer | Promise<ValidateAnswer> {
    let ref = this.keyValues.get(body.key)
    if (ref === undefined) {
      // Keyward's format in its forgiving form, else an imported value exactly as typed (trimmed).
      const portable = portableKeyHash(body.key, 'base64')
      if (portable === null) return this.recordRefusal(who.accountId, NO_PRODUCT, 'not_found', now)
      ref = { hotKey: portable, view: null }
      this.keyValues.set(body.key, ref)
    }
    const hotKey = ref.hotKey
    const state = this.hot.getRef(ref, now)
    if (state instanceof Promise) return state.then((s) => this.withPolicy(who, body, country, hotKey, s, Date.now()))
    return this.withPolicy(who, body, country, hotKey, state, now)
  }

  /** A key with a policy answers with the policy's current terms merged under its own (memory, as the key). */
  private withPolicy(who: Principal, body: ValidateBody, country: string | null, hotKey: string, state: KeyState | null, now: number) {
    if (state === null || state.policyId === null) return this.decideWith(who, body, country, hotKey, state, now)
    const policy = this.policies.get(state.policyId, now)
    if (policy instanceof Promise) {
      return policy.then((p) => this.decideWith(who, body, country, hotKey, applyPolicy(state, p), Date.now()))
    }
    return this.decideWith(who, body, country, hotKey, applyPolicy(state, policy), now)
  }

  /**
   * The contract's decision order, first match wins: not_found, revoked, suspended, expired,
   * entitlements_missing, then the device (held slot; new device: device_already_used, free slot or
   * activation_limit). Metered keys' credits_exhausted comes last, after the slot decision.
   */
  private decideWith(
    who: Principal,
    body: ValidateBody,
    country: string | null,
    hotKey: string,
    state: KeyState | null,
    now: number,
  ): ValidateAnswer | Promise<ValidateAnswer> {
    const account = who.accountId
    if (state === null || state.accountId !== account) return this.lookFurther(who, body, country, hotKey, now)
    if (body.product_id != null && body.product_id !== state.productId) return this.recordRefusal(account, NO_PRODUCT, 'not_found', now)
    if (state.status === 'revoked') return this.recordRefusal(account, state.productId, 'revoked', now)
    if (state.status === 'suspended') return this.recordRefusal(account, state.productId, 'suspended', now)
    if (expiryRefused(state, now)) return this.recordRefusal(account, state.productId, 'expired', now)
    if (body.require_entitlements !== undefined) {
      const missing = missingEntitlements(state.entitlements, body.require_entitlements)
      if (missing.length > 0) return this.lacking(account, state.productId, missing, now)
    }

    const fingerprint = body.device_fingerprint.toLowerCase()
    const appVersion = body.app_version ?? null
    if (hasDevice(state, fingerprint)) {
      if (state.metered) return this.metered(who, body, hotKey, state, now)
      this.lastSeen.record(hotKey, fingerprint, appVersion, now, body.device_name)
      this.outcomes.record(account, state.productId, OUTCOME.valid, now)
      validateOutcomes.valid.inc()
      return validAnswerOf(state, deviceCount(state), now)
    }
    // Every slot is taken as far as this node knows; deactivations invalidate this entry everywhere.
    // (With one_key_per_device, device_already_used comes first and only Postgres knows it.)
    if (deviceCount(state) >= state.limit && !state.oneKeyPerDevice) return this.recordRefusal(account, state.productId, 'activation_limit', now)
    const device = { fingerprint, appVersion, country: countryOf(country), name: body.device_name ?? null }
    if (!state.metered) return this.activate(who, hotKey, state, device, null)
    // A metered key's new device: the cost is set aside first (credits_exhausted records no
    // activation), and given back when the activation is refused after all.
    const cost = body.cost ?? 1
    const spent = this.credits.spend(hotKey, state.accountId, state.productId, cost, now)
    const then = (s: Spent): ValidateAnswer | Promise<ValidateAnswer> =>
      s.ok ? this.activate(who, hotKey, state, device, { cost, remaining: s.remaining, from: s.from }) : this.exhausted(account, state.productId, s, Date.now())
    return spent instanceof Promise ? spent.then(then) : then(spent)
  }

  /**
   * A miss on the value's portable hash in this account: the imported keys' own lookups (imported.ts),
   * then the decision as for any key. Synchronous when memory answers (a repeated unknown value is
   * negative entries only), so a flood of guesses costs no promise.
   */
  private lookFurther(who: Principal, body: ValidateBody, country: string | null, portableHot: string, now: number) {
    const found = this.imported.find(who.accountId, body.key, portableHot, now)
    const decide = (f: Found | null, at: number): ValidateAnswer | Promise<ValidateAnswer> =>
      f === null ? this.recordRefusal(who.accountId, NO_PRODUCT, 'not_found', at) : this.withPolicy(who, body, country, f.hotKey, f.state, at)
    return found instanceof Promise ? found.then((f) => decide(f, Date.now())) : decide(found, now)
  }

  /** A device new to this node: the slot decision in Postgres, under the key row lock. */
  private async activate(
    who: Principal,
    hotKey: string,
    cached: KeyState,
    device: { fingerprint: string; appVersion: string | null; country: string | null; name: string | null },
    credits: { cost: number; remaining: number | null; from?: SpentFrom } | null,
  ): Promise<ValidateAnswer> {
    const { fingerprint, appVersion } = device
    let result: Awaited<ReturnType<typeof claimSeat>>
    try {
      result = await claimSeat(this.deps, who.accountId, { keyHash: keyHashOf(hotKey) }, device, DEVICE)
    } catch (err) {
      if (credits) this.credits.refund(credits.from, credits.cost)
      throw err
    }
    if (credits && result.kind !== 'existing' && result.kind !== 'created') this.credits.refund(credits.from, credits.cost)
    switch (result.kind) {
      case 'not_found':
        this.hot.invalidate(hotKey) // memory was behind Postgres
        return this.recordRefusal(who.accountId, NO_PRODUCT, 'not_found', Date.now())
      case 'revoked':
      case 'suspended':
      case 'expired':
        this.hot.invalidate(hotKey) // memory was behind Postgres
        return this.recordRefusal(who.accountId, cached.productId, result.kind, Date.now())
      case 'limit':
        if (deviceCount(cached) < cached.limit) this.hot.invalidate(hotKey)
        return this.recordRefusal(who.accountId, cached.productId, 'activation_limit', Date.now())
      case 'device_used':
        return this.recordRefusal(who.accountId, cached.productId, 'device_already_used', Date.now())
      case 'existing':
        this.hot.addDevice(hotKey, fingerprint)
        this.lastSeen.record(hotKey, fingerprint, appVersion, Date.now(), device.name ?? undefined)
        break
      case 'created':
        // claimSeat announced it to every node (this one included); an update left from the device's
        // previous activation must not overwrite the new one. When the activation started the key's
        // term (expiry_basis first_activation), claimSeat dropped the key everywhere instead.
        if (result.expirySet) this.hot.invalidate(hotKey)
        else this.hot.addDevice(hotKey, fingerprint)
        this.lastSeen.forget(hotKey, fingerprint)
        break
    }
    const { key } = result
    const now = Date.now()
    this.outcomes.record(who.accountId, key.product_id, OUTCOME.valid, now)
    const terms: Terms = {
      policyId: key.policy_id,
      plan: key.plan,
      expiresAt: key.expires_at ? key.expires_at.getTime() : null,
      limit: key.activation_limit,
      entitlements: key.entitlements,
      graceMs: key.grace_seconds * 1000,
      keep: key.after_expiry === 'keep',
    }
    validateOutcomes.valid.inc()
    return validAnswer(terms, result.activeCount, now, credits ? credits.remaining : null)
  }

  /**
   * The holder's routes (deactivate, devices) cost Postgres work: each call is admitted by the
   * account's gate on this node first (holder-gate.ts: rate and concurrency, 429 `rate_limited` past
   * them, like validate's), and a key this node
   * knows not to exist in the account (the hot state, its negative entries included) is answered
   * without Postgres. Returns the key's hash, or null for an unknown key (or another product's).
   */
  private async holderKey(who: Principal, key: string, productId: string | null | undefined): Promise<string | null> {
    const now = Date.now()
    let hotKey = portableKeyHash(key, 'base64')
    if (hotKey === null) return null
    let state = this.hot.get(hotKey, now)
    if (state instanceof Promise) state = await state
    if (state === null || state.accountId !== who.accountId) {
      const found = await this.imported.find(who.accountId, key, hotKey, Date.now())
      if (found === null) return null
      ;({ hotKey, state } = found)
    }
    if (productId != null && productId !== state.productId) return null
    return keyHashOf(hotKey)
  }

  /**
   * POST /v1/deactivate: the key's holder releases one of its devices (activations/service.ts,
   * releaseByHolder); a device holding no slot, or an unknown key, is `deactivated: false`.
   */
  async deactivate(who: Principal, body: DeactivateBody): Promise<DeactivateAnswer> {
    const release = await this.holders.admit(who.accountId, Date.now())
    try {
      const keyHash = await this.holderKey(who, body.key, null)
      const result = keyHash === null ? null : await releaseByHolder(this.deps, who.accountId, keyHash, body.device_fingerprint.toLowerCase())
      if (!result) return { deactivated: false, activations_used: 0, activation_limit: 0 }
      return { deactivated: result.deactivated, activations_used: result.used, activation_limit: result.limit }
    } finally {
      release()
    }
  }

  /** POST /v1/devices: the key's active devices (devices.ts); an unknown key (or another product's) is 404. */
  async devices(who: Principal, body: DevicesBody): Promise<DevicesAnswer> {
    const release = await this.holders.admit(who.accountId, Date.now())
    try {
      const keyHash = await this.holderKey(who, body.key, body.product_id)
      return await listDevices(this.deps, this.lastSeen, who, keyHash, body.product_id)
    } finally {
      release()
    }
  }

  flush(): Promise<void> {
    return this.lastSeen.flush()
  }

  close() {
    this.hot.close()
    this.credits.close().catch(() => {})
    this.policies.close()
  }
}

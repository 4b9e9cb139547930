// The validation engine: the contract's decision order over the hot state, new devices in one short
// locking transaction, deactivation by the device or the admin. Refusals are answers (values);
// exceptions are for failed requests (429, 404 on admin routes, 503 when Postgres is needed and down).
import type { Deps } from '../../deps'
import { AppError, notFound } from '../../core/errors'
import { secondsToUtcMidnight } from '../../infra/counters'
import { hashKeyValue, isId, normalizeKeyValue } from '../../infra/crypto'
import { DigestMemo } from '../../infra/digest-memo'
import { validateOutcomes } from '../../infra/metrics'
import { NO_PRODUCT, OUTCOME, ValidationCounts } from '../analytics/validation-counts'
import { byApiKey, DEVICE } from '../events/outbox'
import { PLAN_LIMITS } from '../../core/plans'
import type { Principal } from '../../core/principal'
import type { Activation } from '../activations/model'
import {
  claimSlot,
  countActive,
  countUserRelease,
  findActivation,
  isActiveDevice,
  lockKeyForSlot,
  mayReleaseAsUser,
  releaseSlot,
} from '../activations/repo'
import { deviceCount, hasDevice, HotState, hotKeyOf, keyHashOf, type KeyState } from './hot-state'
import { LastSeenWriter } from './last-seen'
import type { DeactivateAnswer, DeactivateBody, Reason, ValidateAnswer, ValidateBody } from './model'
import { loadKeyState } from './repo'

/** Key value as sent → hot-state key, for recently validated keys (see infra/digest-memo.ts). */
const KNOWN_KEY_VALUES = 65_536

// Refusals never change: one frozen object each instead of an allocation per answer.
const REFUSED: Record<Reason, ValidateAnswer> = {
  not_found: Object.freeze({ valid: false, reason: 'not_found' }),
  revoked: Object.freeze({ valid: false, reason: 'revoked' }),
  expired: Object.freeze({ valid: false, reason: 'expired' }),
  activation_limit: Object.freeze({ valid: false, reason: 'activation_limit' }),
}

function rateLimited(limit: number | null): AppError {
  validateOutcomes.rate_limited.inc()
  return new AppError('rate_limited', `This account's daily limit of ${limit} validate calls is reached`, {
    retryAfter: secondsToUtcMidnight(),
  })
}

function refuse(reason: Reason): ValidateAnswer {
  validateOutcomes[reason].inc()
  return REFUSED[reason]
}

function valid(plan: string | null, expiresAt: number | null, used: number, limit: number): ValidateAnswer {
  validateOutcomes.valid.inc()
  return {
    valid: true,
    plan,
    expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    activations_used: used,
    activation_limit: limit,
  }
}

/** The request's country header when it is two letters (upper-cased); anything else is not recorded. */
function countryOf(value: string | null): string | null {
  return value !== null && /^[A-Za-z]{2}$/.test(value) ? value.toUpperCase() : null
}

export class ValidationEngine {
  readonly hot: HotState
  readonly lastSeen: LastSeenWriter
  /** Answers by account, product, outcome and day, for the analytics (written by the flush job). */
  readonly outcomes: ValidationCounts
  /** Only values that can be keys are remembered (a guess that cannot be a key costs no memory). */
  private keyValues = new DigestMemo(KNOWN_KEY_VALUES)

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
    this.lastSeen = new LastSeenWriter(sql)
    this.outcomes = new ValidationCounts(sql)
  }

  /** A refusal, counted for the analytics (`productId` NO_PRODUCT when it belongs to none). */
  private refused(accountId: string, productId: string, reason: Reason, now: number): ValidateAnswer {
    this.outcomes.record(accountId, productId, OUTCOME[reason], now)
    return refuse(reason)
  }

  private limited(accountId: string, limit: number | null, now: number): AppError {
    this.outcomes.record(accountId, NO_PRODUCT, OUTCOME.rate_limited, now)
    return rateLimited(limit)
  }

  /**
   * POST /v1/validate after authentication and body validation; `headers` supply the country.
   * Synchronous (no promise) when the quota answers from memory and the key is in the hot state:
   * the common case does no I/O and waits for nothing. One clock reading serves quota, expiry and last-seen.
   */
  validate(who: Principal, body: ValidateBody, headers: Headers): ValidateAnswer | Promise<ValidateAnswer> {
    const now = Date.now()
    // Every call that passed request validation counts, valid or not; a refused (429) call does not.
    const limit = PLAN_LIMITS[who.plan]?.validationsPerDay ?? null
    const taken = this.deps.counters.take(who.accountId, limit, now)
    if (taken === true) return this.decide(who, body, headers, now)
    if (taken === false) throw this.limited(who.accountId, limit, now)
    return taken.then((ok) => {
      if (!ok) throw this.limited(who.accountId, limit, Date.now())
      return this.decide(who, body, headers, Date.now())
    })
  }

  private decide(who: Principal, body: ValidateBody, headers: Headers, now: number): ValidateAnswer | Promise<ValidateAnswer> {
    let hotKey = this.keyValues.get(body.key)
    if (hotKey === undefined) {
      const canonical = normalizeKeyValue(body.key)
      if (canonical === null) return this.refused(who.accountId, NO_PRODUCT, 'not_found', now)
      hotKey = hashKeyValue(canonical, 'base64')
      this.keyValues.set(body.key, hotKey)
    }
    const state = this.hot.get(hotKey, now)
    if (state instanceof Promise) return state.then((s) => this.decideWith(who, body, headers, hotKey, s, Date.now()))
    return this.decideWith(who, body, headers, hotKey, state, now)
  }

  /** The contract's decision order, first match wins. */
  private decideWith(
    who: Principal,
    body: ValidateBody,
    headers: Headers,
    hotKey: string,
    state: KeyState | null,
    now: number,
  ): ValidateAnswer | Promise<ValidateAnswer> {
    const account = who.accountId
    if (state === null || state.accountId !== account) return this.refused(account, NO_PRODUCT, 'not_found', now)
    if (body.product_id != null && body.product_id !== state.productId) return this.refused(account, NO_PRODUCT, 'not_found', now)
    if (state.status === 'revoked') return this.refused(account, state.productId, 'revoked', now)
    if (state.status === 'expired' || (state.expiresAt !== null && state.expiresAt <= now)) return this.refused(account, state.productId, 'expired', now)

    const fingerprint = body.device_fingerprint.toLowerCase()
    const appVersion = body.app_version ?? null
    if (hasDevice(state, fingerprint)) {
      this.lastSeen.record(hotKey, fingerprint, appVersion, now, body.device_name)
      this.outcomes.record(account, state.productId, OUTCOME.valid, now)
      return valid(state.plan, state.expiresAt, deviceCount(state), state.limit)
    }
    // Every slot is taken as far as this node knows; deactivations invalidate this entry everywhere.
    if (deviceCount(state) >= state.limit) return this.refused(account, state.productId, 'activation_limit', now)
    const country = countryOf(headers.get(this.deps.config.countryHeader))
    return this.activate(who, hotKey, state, { fingerprint, appVersion, country, name: body.device_name ?? null })
  }

  /** A device new to this node: the slot decision in Postgres, under the key row lock. */
  private async activate(
    who: Principal,
    hotKey: string,
    cached: KeyState,
    device: { fingerprint: string; appVersion: string | null; country: string | null; name: string | null },
  ): Promise<ValidateAnswer> {
    const { fingerprint, appVersion } = device
    const keyHash = keyHashOf(hotKey)
    const result = await this.deps.sql.begin(async (tx) => {
      const key = await lockKeyForSlot(tx, who.accountId, { keyHash })
      if (!key) return { kind: 'not_found' as const }
      if (key.status === 'revoked') return { kind: 'revoked' as const }
      if (key.expired) return { kind: 'expired' as const }
      return { ...(await claimSlot(tx, key, device, DEVICE)), key }
    })
    switch (result.kind) {
      case 'not_found':
        this.hot.invalidate(hotKey) // memory was behind Postgres
        return this.refused(who.accountId, NO_PRODUCT, 'not_found', Date.now())
      case 'revoked':
      case 'expired':
        this.hot.invalidate(hotKey) // memory was behind Postgres
        return this.refused(who.accountId, cached.productId, result.kind, Date.now())
      case 'limit':
        if (deviceCount(cached) < cached.limit) this.hot.invalidate(hotKey)
        return this.refused(who.accountId, cached.productId, 'activation_limit', Date.now())
      case 'existing':
        this.hot.addDevice(hotKey, fingerprint)
        this.lastSeen.record(hotKey, fingerprint, appVersion, Date.now(), device.name ?? undefined)
        break
      case 'created':
        this.hot.addDevice(hotKey, fingerprint)
        this.lastSeen.forget(hotKey, fingerprint) // an update left from the device's previous activation
        // Other nodes learn the device without reading it back. The activation is committed either
        // way, so a failed broadcast is logged, not turned into an error answer.
        await this.deps.bus
          .publish({ kind: 'device', accountId: who.accountId, keyHash, fingerprint, activationId: result.activation.id })
          .catch((err) => this.deps.log.warn({ err: String(err) }, 'device broadcast failed'))
        break
    }
    const { key } = result
    this.outcomes.record(who.accountId, key.product_id, OUTCOME.valid, Date.now())
    return valid(key.plan, key.expires_at ? key.expires_at.getTime() : null, result.activeCount, key.activation_limit)
  }

  /**
   * POST /v1/deactivate: the key's holder releases one of its devices (reason `user`), counted against
   * `deactivations_allowed` under the key row lock: past the cap a release that would happen is 409
   * `deactivation_limit` and nothing changes; a device holding no slot is `deactivated: false` either way.
   */
  async deactivate(who: Principal, body: DeactivateBody): Promise<DeactivateAnswer> {
    const canonical = normalizeKeyValue(body.key)
    if (canonical === null) return { deactivated: false, activations_used: 0, activation_limit: 0 }
    const keyHash = hashKeyValue(canonical)
    const fingerprint = body.device_fingerprint.toLowerCase()
    const result = await this.deps.sql.begin(async (tx) => {
      const key = await lockKeyForSlot(tx, who.accountId, { keyHash })
      if (!key) return null
      if (!mayReleaseAsUser(key) && (await isActiveDevice(tx, key.id, fingerprint))) {
        throw new AppError('deactivation_limit', `This key allows its holder ${key.deactivations_allowed} deactivations, and all are used`)
      }
      const released = await releaseSlot(tx, key, { fingerprint }, 'user', DEVICE)
      if (released) await countUserRelease(tx, key.id)
      return { deactivated: released !== null, used: await countActive(tx, key.id), limit: key.activation_limit }
    })
    if (!result) return { deactivated: false, activations_used: 0, activation_limit: 0 }
    if (result.deactivated) await this.changed(who.accountId, keyHash)
    return { deactivated: result.deactivated, activations_used: result.used, activation_limit: result.limit }
  }

  /** DELETE /v1/keys/:id/activations/:activation_id (reason `admin`); already deactivated → 200 as is. */
  async removeActivation(who: Principal, keyId: string, activationId: string): Promise<Activation> {
    if (!isId('key', keyId)) throw notFound('key', keyId)
    if (!isId('act', activationId)) throw notFound('activation', activationId)
    const result = await this.deps.sql.begin(async (tx) => {
      const key = await lockKeyForSlot(tx, who.accountId, { id: keyId })
      if (!key) throw notFound('key', keyId)
      const released = await releaseSlot(tx, key, { activationId }, 'admin', byApiKey(who))
      if (released) return { activation: released, keyHash: key.key_hash }
      const activation = await findActivation(tx, keyId, activationId)
      if (!activation) throw notFound('activation', activationId)
      return { activation, keyHash: null }
    })
    if (result.keyHash) await this.changed(who.accountId, result.keyHash)
    return result.activation
  }

  /** After a committed change to a key's slots: drop it here and on every node before answering. */
  private async changed(accountId: string, keyHash: string) {
    this.hot.invalidate(hotKeyOf(keyHash))
    await this.deps.bus.publish({ kind: 'key', accountId, keyHash })
  }

  flush(): Promise<void> {
    return this.lastSeen.flush()
  }

  close() {
    this.hot.close()
  }
}

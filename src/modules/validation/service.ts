// The validation engine: the contract's decision order over the hot state. Each call's facts travel
// as one record (check.ts) and each answer is counted once, by `answered`: the analytics counts and the
// node's metric. Seat changes themselves (a new device's claim) are the activations module's
// (modules/activations/service.ts): this engine decides the answer and calls it; the holder's routes
// (deactivate, devices) are holders.ts, on the engine's hot state. Refusals are answers (values);
// exceptions are for failed requests (429, 503 when Postgres is needed and down). The engine owns
// what it batches: `flush` writes it, `close` gives everything back.
import type { Deps } from '../../deps'
import { AppError, invalid } from '../../core/errors'
import { parseComponents } from '../../core/component-match'
import { secondsToUtcMidnight } from '../../infra/counters'
import { portableKeyHash } from '../../infra/crypto'
import { DigestMemo } from '../../infra/digest-memo'
import { validateOutcomes } from '../../infra/metrics'
import { NO_PRODUCT, OUTCOME, ValidationCounts } from '../analytics/validation-counts'
import { DEVICE } from '../events/outbox'
import { PLAN_LIMITS } from '../../core/plans'
import type { Principal } from '../../core/principal'
import { missingEntitlements } from '../../core/entitlements'
import { claimSeat } from '../activations/service'
import { Check, countryOf } from './check'
import { deviceList, DRIFT, identityVerdict, KNOWN, LIMIT, MISMATCH } from './identity'
import { Holders } from './holders'
import { applyPolicy, deviceCount, hasDevice, HotState, hotKeyOf, keyHashOf, type KeyRef, type KeyState } from './hot/hot-state'
import { ImportedLookup, type Found } from './imported'
import { PolicyCache } from './policy-cache'
import { LastSeenWriter } from './last-seen'
import type { Reason, ValidateAnswer, ValidateBody } from './model'
import { loadKeyState } from './repo'
import { CreditLeases } from '../credits/leases'
import type { CreditLimiter, Spent, SpentFrom } from '../credits/model'
import { findKey } from '../keys/repo'
import { expiryRefused, REFUSED, validAnswer, validAnswerOf, type Terms } from './answers'

/** Key value as sent → its hot-state key and the entry's object last answered, for recently validated keys (see infra/digest-memo.ts). */
const KNOWN_KEY_VALUES = 65_536

/** A metered key's spending set aside for a new device: given back when the activation is refused. */
interface SetAside {
  cost: number
  remaining: number | null
  from?: SpentFrom
}

export class ValidationEngine {
  readonly hot: HotState
  /** Policies by id, beside the hot keys (policy-cache.ts). */
  readonly policies: PolicyCache
  readonly lastSeen: LastSeenWriter
  /** The license holder's routes (POST /v1/devices, /v1/deactivate) on this engine's hot state. */
  readonly holders: Holders
  /** Answers by account, product, outcome and day, for the analytics (written by `flush`). */
  private outcomes: ValidationCounts
  /** This node's leases of metered keys' credits (credits/leases.ts), behind the limiter interface; written and given back by `flush` and `close`. */
  readonly credits: CreditLimiter
  /** Only values that can be keys are remembered (a guess that cannot be a key costs no memory). */
  private keyValues = new DigestMemo<KeyRef>(KNOWN_KEY_VALUES)
  /** Imported keys stored under their account-scoped or SHA-256 hash (imported.ts). */
  private imported: ImportedLookup
  /** The facts of the call deciding now, reused call after call (check.ts: a decision that waits takes a copy). */
  private check = new Check()
  private unbarrier: () => void

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
    this.credits = new CreditLeases(sql, bus, { refOf: hotKeyOf, hashOf: keyHashOf }, findKey, deps.log)
    this.holders = new Holders(deps, this.hot, this.imported, this.lastSeen)
    // Before an inactivity release judges a device idle, every node writes the last-seen times it
    // batches (modules/activations/inactivity-release.ts).
    this.unbarrier = bus.onBarrier(() => this.lastSeen.flush())
  }

  /**
   * The one place an answer is counted: the analytics (per account, product and day, written by
   * `flush`) and the node's metric (folded in at scrape time, infra/metrics.ts).
   */
  private answered(check: Check, outcome: number): void {
    this.outcomes.record(check.account, check.product, outcome, check.now)
    validateOutcomes[outcome]!++
  }

  /** A refusal: counted, and its frozen answer. */
  private refuse(check: Check, reason: Reason): ValidateAnswer {
    this.answered(check, OUTCOME[reason])
    return REFUSED[reason]
  }

  /** The daily quota is reached: counted (under no product), and the 429. */
  private limited(check: Check, limit: number | null): AppError {
    this.answered(check, OUTCOME.rate_limited)
    return new AppError('rate_limited', `This account's daily limit of ${limit} validate calls is reached`, {
      retryAfter: secondsToUtcMidnight(),
    })
  }

  /** entitlements_missing: a refusal that names the codes, so it is built per answer. */
  private lacking(check: Check, missing: string[]): ValidateAnswer {
    this.answered(check, OUTCOME.entitlements_missing)
    return { valid: false, reason: 'entitlements_missing', missing }
  }

  /** credits_exhausted: the balance left and the next refill, built per answer. */
  private exhausted(check: Check, spent: Spent & { ok: false }): ValidateAnswer {
    this.answered(check, OUTCOME.credits_exhausted)
    return { valid: false, reason: 'credits_exhausted', credits_remaining: spent.remaining, refills_at: spent.refillsAt }
  }

  /**
   * POST /v1/validate after authentication and body validation; `country`: the raw value of the
   * request's country header, read by the door (null when absent).
   * Synchronous (no promise) when the quota answers from memory and the key is in the hot state:
   * the common case does no I/O and waits for nothing. One clock reading serves quota, expiry and last-seen.
   */
  validate(who: Principal, body: ValidateBody, country: string | null): ValidateAnswer | Promise<ValidateAnswer> {
    // Machine identity's components (1..16 {name: hash}): malformed is a 400 naming the field, before
    // anything is counted; the hashes are kept lower-cased (core/component-match.ts).
    if (body.components != null) {
      const parsed = parseComponents(body.components)
      if (!parsed.ok) throw invalid(`body.${parsed.field}`, parsed.detail)
      body.components = parsed.components
    }
    const now = Date.now()
    // Every call that passed request validation counts, valid or not; a refused (429) call does not.
    const limit = PLAN_LIMITS[who.plan]?.validationsPerDay ?? null
    const taken = this.deps.counters.take(who.accountId, limit, now)
    if (taken === true) return this.decide(this.check.start(who, body, country, now))
    if (taken === false) throw this.limited(this.check.start(who, body, country, now), limit)
    return taken.then((ok) => {
      const check = new Check().start(who, body, country, Date.now())
      if (!ok) throw this.limited(check, limit)
      return this.decide(check)
    })
  }

  private decide(check: Check): ValidateAnswer | Promise<ValidateAnswer> {
    const value = check.body.key
    let ref = this.keyValues.get(value)
    if (ref === undefined) {
      // Keyward's format in its forgiving form, else an imported value exactly as typed (trimmed).
      const portable = portableKeyHash(value, 'base64')
      if (portable === null) return this.refuse(check, 'not_found')
      ref = { hotKey: portable, view: null }
      this.keyValues.set(value, ref)
    }
    check.hotKey = ref.hotKey
    const state = this.hot.getRef(ref, check.now)
    if (state instanceof Promise) {
      const held = check.held()
      return state.then((s) => this.withPolicy(held.at(Date.now()), s))
    }
    return this.withPolicy(check, state)
  }

  /** A key with a policy answers with the policy's current terms merged under its own (memory, as the key). */
  private withPolicy(check: Check, state: KeyState | null): ValidateAnswer | Promise<ValidateAnswer> {
    if (state === null || state.policyId === null) return this.decideWith(check, state)
    const policy = this.policies.get(state.policyId, check.now)
    if (policy instanceof Promise) {
      const held = check.held()
      return policy.then((p) => this.decideWith(held.at(Date.now()), applyPolicy(state, p)))
    }
    return this.decideWith(check, applyPolicy(state, policy))
  }

  /**
   * The contract's decision order, first match wins: not_found, revoked, suspended, expired,
   * entitlements_missing, then the device (held seat; new device: device_already_used, free seat or
   * activation_limit). Metered keys' credits_exhausted comes last, after the seat decision.
   */
  private decideWith(check: Check, state: KeyState | null): ValidateAnswer | Promise<ValidateAnswer> {
    if (state === null || state.accountId !== check.account) return this.lookFurther(check)
    const { body, now } = check
    if (body.product_id != null && body.product_id !== state.productId) return this.refuse(check, 'not_found')
    check.product = state.productId
    if (state.status === 'revoked') return this.refuse(check, 'revoked')
    if (state.status === 'suspended') return this.refuse(check, 'suspended')
    if (expiryRefused(state, now)) return this.refuse(check, 'expired')
    if (body.require_entitlements !== undefined) {
      const missing = missingEntitlements(state.entitlements, body.require_entitlements)
      if (missing.length > 0) return this.lacking(check, missing)
    }

    const fingerprint = (check.fingerprint = body.device_fingerprint.toLowerCase())
    if (state.componentMatch !== 'off') return this.identified(check, state)
    if (hasDevice(state, fingerprint)) return this.known(check, state)
    // Every seat is taken as far as this node knows; deactivations invalidate this entry everywhere.
    // (With one_key_per_device, device_already_used comes first and only Postgres knows it.)
    if (deviceCount(state) >= state.limit && !state.oneKeyPerDevice) return this.refuse(check, 'activation_limit')
    return this.newDevice(check, state, null)
  }

  /** A device holding a seat: valid (a metered key spends its cost). */
  private known(check: Check, state: KeyState): ValidateAnswer | Promise<ValidateAnswer> {
    if (state.metered) return this.metered(check, state)
    const { body, now } = check
    this.lastSeen.record(check.hotKey, check.fingerprint, body.app_version ?? null, now, body.device_name, body.components ?? undefined)
    this.answered(check, OUTCOME.valid)
    return validAnswerOf(state, deviceCount(state), now)
  }

  /**
   * Step 6 with the key's component_match on (docs/integrating.md, "Identifying machines"): memory
   * decides a known fingerprint and the refusals (identity.ts); a new device or a rebind is decided in
   * Postgres. A key read while its rule was off holds no identity: Postgres decides this call, and
   * the key is read again (with it) for the next.
   */
  private identified(check: Check, state: KeyState): ValidateAnswer | Promise<ValidateAnswer> {
    const sent = check.body.components ?? null
    const identity = state.identity
    if (identity === null) {
      this.hot.invalidate(check.hotKey)
      return sent === null ? this.refuse(check, 'device_mismatch') : this.newDevice(check, state, null)
    }
    switch (identityVerdict(state, identity, check.fingerprint, sent)) {
      case DRIFT:
        identity.components.set(check.fingerprint, sent!) // written to Postgres with the last-seen batch
        return this.known(check, state)
      case KNOWN:
        return this.known(check, state)
      case MISMATCH:
        return this.refuse(check, 'device_mismatch')
      case LIMIT:
        return this.refuse(check, 'activation_limit')
      default:
        return this.newDevice(check, state, deviceList(state))
    }
  }

  /**
   * A device new to this node: its seat (or, with machine identity, its rebind) is decided in Postgres.
   * `seen`: with machine identity, the active fingerprints memory decided from (a race's loser is
   * refused: activations/identity.ts); null otherwise.
   */
  private newDevice(check: Check, state: KeyState, seen: readonly string[] | null): ValidateAnswer | Promise<ValidateAnswer> {
    const { body, now } = check
    const held = check.held() // the claim waits on Postgres
    if (!state.metered) return this.activate(held, state, null, seen)
    // A metered key's new device: the cost is set aside first (credits_exhausted records no
    // activation), and given back when the activation is refused after all.
    const cost = body.cost ?? 1
    const spent = this.credits.spend(check.hotKey, state.accountId, state.productId, cost, now)
    const then = (s: Spent): ValidateAnswer | Promise<ValidateAnswer> =>
      s.ok ? this.activate(held, state, { cost, remaining: s.remaining, from: s.from }, seen) : this.exhausted(held.at(Date.now()), s)
    return spent instanceof Promise ? spent.then(then) : then(spent)
  }

  /** A known device's valid answer for a metered key: its cost spent, or credits_exhausted. */
  private metered(check: Check, state: KeyState): ValidateAnswer | Promise<ValidateAnswer> {
    const spent = this.credits.spend(check.hotKey, state.accountId, state.productId, check.body.cost ?? 1, check.now)
    if (spent instanceof Promise) {
      const held = check.held()
      return spent.then((s) => this.spent(held.at(Date.now()), state, s))
    }
    return this.spent(check, state, spent)
  }

  private spent(check: Check, state: KeyState, s: Spent): ValidateAnswer {
    if (!s.ok) return this.exhausted(check, s)
    const { body, now } = check
    this.lastSeen.record(check.hotKey, check.fingerprint, body.app_version ?? null, now, body.device_name, body.components ?? undefined)
    this.answered(check, OUTCOME.valid)
    return validAnswer(state, deviceCount(state), now, s.remaining) // built per answer: the balance moves
  }

  /**
   * A miss on the value's portable hash in this account: the imported keys' own lookups (imported.ts),
   * then the decision as for any key. Synchronous when memory answers (a repeated unknown value is
   * negative entries only), so a flood of guesses costs no promise.
   */
  private lookFurther(check: Check): ValidateAnswer | Promise<ValidateAnswer> {
    const found = this.imported.find(check.account, check.body.key, check.hotKey, check.now)
    if (found instanceof Promise) {
      const held = check.held()
      return found.then((f) => this.foundImported(held.at(Date.now()), f))
    }
    return this.foundImported(check, found)
  }

  private foundImported(check: Check, found: Found | null): ValidateAnswer | Promise<ValidateAnswer> {
    if (found === null) return this.refuse(check, 'not_found')
    check.hotKey = found.hotKey
    return this.withPolicy(check, found.state)
  }

  /** A device new to this node: the seat decision in Postgres, under the key row lock. `check`: held (its own). */
  private async activate(check: Check, cached: KeyState, credits: SetAside | null, seen: readonly string[] | null): Promise<ValidateAnswer> {
    const { hotKey, fingerprint, body } = check
    const appVersion = body.app_version ?? null
    const components = body.components ?? null
    const device = { fingerprint, appVersion, country: countryOf(check.country), name: body.device_name ?? null, components }
    let result: Awaited<ReturnType<typeof claimSeat>>
    try {
      result = await claimSeat(this.deps, check.account, { keyHash: keyHashOf(hotKey) }, device, DEVICE, undefined, seen)
    } catch (err) {
      if (credits) this.credits.refund(credits.from, credits.cost)
      throw err
    }
    if (credits && result.kind !== 'existing' && result.kind !== 'created' && result.kind !== 'rebound') this.credits.refund(credits.from, credits.cost)
    check.now = Date.now()
    switch (result.kind) {
      case 'not_found':
        this.hot.invalidate(hotKey) // memory was behind Postgres
        check.product = NO_PRODUCT
        return this.refuse(check, 'not_found')
      case 'revoked':
      case 'suspended':
      case 'expired':
        this.hot.invalidate(hotKey) // memory was behind Postgres
        return this.refuse(check, result.kind)
      case 'limit':
        if (deviceCount(cached) < cached.limit) this.hot.invalidate(hotKey)
        return this.refuse(check, 'activation_limit')
      case 'device_used':
        return this.refuse(check, 'device_already_used')
      case 'mismatch':
        return this.refuse(check, 'device_mismatch')
      case 'existing':
        // with machine identity the stored components were just decided in Postgres: read the key again
        if (result.key.component_match !== 'off') this.hot.invalidate(hotKey)
        else this.hot.addDevice(hotKey, fingerprint)
        this.lastSeen.record(hotKey, fingerprint, appVersion, check.now, device.name ?? undefined, components ?? undefined)
        break
      case 'rebound':
        // claimSeat dropped the key on every node (this one included) before returning
        this.lastSeen.forget(hotKey, fingerprint)
        break
      case 'created':
        // claimSeat announced it to every node (this one included); an update left from the device's
        // previous activation must not overwrite the new one. When the activation started the key's
        // term (expiry_basis first_activation), claimSeat dropped the key everywhere instead.
        if (result.expirySet || result.key.component_match !== 'off') this.hot.invalidate(hotKey)
        else this.hot.addDevice(hotKey, fingerprint)
        this.lastSeen.forget(hotKey, fingerprint)
        break
    }
    const { key } = result
    check.product = key.product_id
    this.answered(check, OUTCOME.valid)
    const terms: Terms = {
      policyId: key.policy_id,
      plan: key.plan,
      expiresAt: key.expires_at ? key.expires_at.getTime() : null,
      limit: key.activation_limit,
      entitlements: key.entitlements,
      graceMs: key.grace_seconds * 1000,
      keep: key.after_expiry === 'keep',
    }
    return validAnswer(terms, result.activeCount, check.now, credits ? credits.remaining : null)
  }

  /**
   * Writes what the engine batches: the last-seen times, the answers' counts and the credit leases'
   * state (idle leases go back). Each keeps what it could not write for the next flush, and one's
   * failure does not hold the others back; the returned promise rejects naming what failed.
   */
  async flush(): Promise<void> {
    const parts = ['last-seen', 'validation outcomes', 'credit leases'] as const
    const settled = await Promise.allSettled([this.lastSeen.flush(), this.outcomes.flush(), this.credits.flush()])
    const failed = settled.flatMap((r, i) => (r.status === 'rejected' ? [`${parts[i]}: ${String(r.reason)}`] : []))
    if (failed.length > 0) throw new Error(`flush failed (${failed.join('; ')})`)
  }

  /**
   * Shutdown: what is batched is written, the credit leases' unspent credits go back to their keys'
   * records (a node killed instead strands them: docs/architecture.md, "Metered keys"), and the
   * caches stop listening to the bus. Failures are logged, not thrown: the node stops either way.
   */
  async close(): Promise<void> {
    this.unbarrier()
    const log = this.deps.log
    await this.lastSeen.flush().catch((err) => log.warn({ err: String(err) }, 'last-seen flush at shutdown failed'))
    await this.outcomes.flush().catch((err) => log.warn({ err: String(err) }, 'validation outcome flush at shutdown failed'))
    await this.credits.close().catch((err) => log.warn({ err: String(err) }, 'credit lease return at shutdown failed'))
    this.hot.close()
    this.policies.close()
  }
}

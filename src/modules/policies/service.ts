// Policies: what a key inherits. An edit is one row and one bus message (every node drops its copy of
// the policy before the call returns), so it reaches every key of the policy at once, at any size.
import { isDeepStrictEqual } from 'node:util'
import { parsePeriod } from '../../core/durations'
import { checkEntitlements } from '../../core/entitlements'
import { AppError, invalid, notFound, foundById } from '../../core/errors'
import type { Principal } from '../../core/principal'
import type { RecordCreated } from '../../infra/record-created'
import { checkMetadata } from '../../core/values'
import type { Deps } from '../../deps'
import { isId, newId } from '../../infra/crypto'
import { byApiKey, emit } from '../events/outbox'
import type { CreatePolicyBody, PatchPolicyBody, Policy } from './model'
import { checkRefill } from '../credits/service'
import type { PolicyCreditsIn } from '../credits/model'
import { SETTING_DEFAULTS } from '../../core/key-settings'
import * as repo from './repo'

function checkDuration(field: string, text: string | null): string | null {
  if (text === null) return null
  const period = parsePeriod(text)
  if (typeof period === 'string') throw invalid(field, period)
  return text
}

function checkPolicyEntitlements(field: string, value: unknown): Record<string, true | number | string> {
  const problems = checkEntitlements(value, false)
  if (problems.length === 0) return value as Record<string, true | number | string>
  const errors = problems.map((p) => ({ field: p.code === null ? field : `${field}.${p.code}`, message: p.message }))
  throw new AppError('invalid_request', `${errors[0]!.field} ${errors[0]!.message}`, { errors })
}

function checkPolicyCredits(credits: PolicyCreditsIn): repo.PolicyWrite['credits'] {
  return credits === null ? null : { initial: credits.initial, refill: checkRefill('body.credits.refill', credits.refill) }
}

export async function createPolicy(deps: Deps, who: Principal, input: CreatePolicyBody, record?: RecordCreated): Promise<Policy> {
  const write: repo.PolicyWrite = {
    name: input.name,
    // a setting not given: its default (core/key-settings.ts)
    plan: input.plan ?? SETTING_DEFAULTS.plan,
    activation_limit: input.activation_limit ?? SETTING_DEFAULTS.activation_limit,
    duration: checkDuration('body.duration', input.duration ?? null),
    expiry_basis: input.expiry_basis ?? 'creation',
    one_key_per_device: input.one_key_per_device ?? SETTING_DEFAULTS.one_key_per_device,
    grace_seconds: input.grace_seconds ?? SETTING_DEFAULTS.grace_seconds,
    after_expiry: input.after_expiry ?? SETTING_DEFAULTS.after_expiry,
    release_after_seconds: input.release_after_seconds ?? SETTING_DEFAULTS.release_after_seconds,
    deactivations_allowed: input.deactivations_allowed ?? SETTING_DEFAULTS.deactivations_allowed,
    entitlements: input.entitlements === undefined ? {} : checkPolicyEntitlements('body.entitlements', input.entitlements),
    credits: input.credits === undefined ? null : checkPolicyCredits(input.credits),
    metadata: input.metadata === undefined ? {} : checkMetadata('body.metadata', input.metadata),
  }
  return deps.sql.begin(async (tx) => {
    // `for share` orders this against a concurrent product delete (which takes the row `for update`).
    const [product] = isId('prod', input.product_id)
      ? await tx`select id from products where id = ${input.product_id} and account_id = ${who.accountId} for share`
      : []
    if (!product) throw notFound('product', input.product_id)
    const policy = await repo.insertPolicy(tx, { ...write, id: newId('pol'), accountId: who.accountId, productId: input.product_id })
    await emit(tx, who.accountId, 'policy.created', policy, byApiKey(who))
    return record ? record(tx, policy) : policy
  })
}

export async function getPolicy(deps: Deps, who: Principal, id: string): Promise<Policy> {
  return foundById('pol', 'policy', id, () => repo.findPolicy(deps.sql, who.accountId, id))
}

export async function listPolicies(deps: Deps, who: Principal, productId: string | undefined): Promise<{ data: Policy[] }> {
  return { data: await repo.listPolicies(deps.sql, who.accountId, productId) }
}

/**
 * Any field but product_id (equal is accepted, different is 400). Omitted fields keep their value;
 * `entitlements` and `metadata` replace the whole object. Nothing changed → the policy as is, no event,
 * no message. `duration` and `credits` apply to keys created afterwards only (computed expiries and
 * balances do not move).
 */
export async function patchPolicy(deps: Deps, who: Principal, id: string, input: PatchPolicyBody): Promise<Policy> {
  const duration = input.duration === undefined ? undefined : checkDuration('body.duration', input.duration)
  const entitlements = input.entitlements === undefined ? undefined : checkPolicyEntitlements('body.entitlements', input.entitlements)
  const metadata = input.metadata === undefined ? undefined : checkMetadata('body.metadata', input.metadata)
  const credits = input.credits === undefined ? undefined : checkPolicyCredits(input.credits)
  const { policy, changed } = await deps.sql.begin(async (tx) => {
    const locked = isId('pol', id) ? await repo.lockPolicy(tx, who.accountId, id, 'update') : null
    if (!locked) throw notFound('policy', id)
    if (input.product_id !== undefined && input.product_id !== locked.product_id) {
      throw invalid('body.product_id', 'is immutable: a policy belongs to one product')
    }
    const current = (await repo.findPolicyWrite(tx, id))!
    const pick = <K extends keyof repo.PolicyWrite>(k: K, v: repo.PolicyWrite[K] | undefined) => (v === undefined ? current[k] : v)
    const next: repo.PolicyWrite = {
      name: pick('name', input.name),
      plan: pick('plan', input.plan),
      activation_limit: pick('activation_limit', input.activation_limit),
      duration: pick('duration', duration),
      expiry_basis: pick('expiry_basis', input.expiry_basis),
      one_key_per_device: pick('one_key_per_device', input.one_key_per_device),
      grace_seconds: pick('grace_seconds', input.grace_seconds),
      after_expiry: pick('after_expiry', input.after_expiry),
      release_after_seconds: pick('release_after_seconds', input.release_after_seconds),
      deactivations_allowed: pick('deactivations_allowed', input.deactivations_allowed),
      entitlements: pick('entitlements', entitlements),
      credits: pick('credits', credits),
      metadata: pick('metadata', metadata),
    }
    const changed = (Object.keys(next) as (keyof repo.PolicyWrite)[]).some((k) => !isDeepStrictEqual(next[k], current[k]))
    if (!changed) return { policy: (await repo.findPolicy(tx, who.accountId, id))!, changed: false }
    await repo.updatePolicy(tx, id, next)
    if (next.release_after_seconds !== current.release_after_seconds) await repo.copyReleaseAfter(tx, id, next.release_after_seconds)
    const policy = (await repo.findPolicy(tx, who.accountId, id))!
    await emit(tx, who.accountId, 'policy.updated', policy, byApiKey(who))
    return { policy, changed: true }
  })
  if (changed) await deps.bus.publish({ kind: 'policy', policyId: id })
  return policy
}

/** 204; 409 policy_in_use while any key references it. Emits policy.deleted with the policy as it was. */
export async function deletePolicy(deps: Deps, who: Principal, id: string): Promise<void> {
  await deps.sql.begin(async (tx) => {
    const locked = isId('pol', id) ? await repo.lockPolicy(tx, who.accountId, id, 'update') : null
    if (!locked) throw notFound('policy', id)
    if (await repo.hasKeys(tx, id)) throw new AppError('policy_in_use', `Policy ${id} is referenced by keys; move or delete them first`)
    const policy = (await repo.findPolicy(tx, who.accountId, id))!
    await repo.deletePolicy(tx, id)
    await emit(tx, who.accountId, 'policy.deleted', policy, byApiKey(who))
  })
}

import type { Deps } from '../../deps'
import { isId } from '../../infra/crypto'
import { AppError, notFound } from '../../core/errors'
import { PLAN_LIMITS } from '../../core/plans'
import type { Principal } from '../../core/principal'
import { RANGES, type CountryEntry, type CreditsEntry, type Overview, type Range, type TrendEntry, type ValidationsEntry } from './model'
import * as repo from './repo'

/** Analytics are for paid plans. The routes check this before query validation; the service again. */
export function requireAnalyticsPlan(who: Principal): void {
  if (!PLAN_LIMITS[who.plan].analytics) {
    throw new AppError('plan_upgrade_required', `Analytics are not part of the ${who.plan} plan; upgrade to use them`)
  }
}

export async function overview(deps: Deps, who: Principal): Promise<Overview> {
  requireAnalyticsPlan(who)
  const [stored, apiCallsToday] = await Promise.all([
    repo.overview(deps.sql, who.accountId),
    deps.counters.today(who.accountId),
  ])
  return {
    ...stored,
    api_calls_today: apiCallsToday,
    api_calls_limit_today: PLAN_LIMITS[who.plan].validationsPerDay ?? -1,
  }
}

/** The product filter: null for all products; 404 for an unknown id or another account's product. */
async function productFilter(deps: Deps, who: Principal, productId: string | undefined): Promise<string | null> {
  if (productId === undefined) return null
  if (!(isId('prod', productId) && (await repo.productExists(deps.sql, who.accountId, productId)))) {
    throw notFound('product', productId)
  }
  return productId
}

export async function activationTrend(
  deps: Deps,
  who: Principal,
  query: { range?: Range; product_id?: string },
): Promise<TrendEntry[]> {
  requireAnalyticsPlan(who)
  const productId = await productFilter(deps, who, query.product_id)
  return repo.trend(deps.sql, who.accountId, RANGES[query.range ?? '7d'], productId)
}

/**
 * Validate answers by outcome per day (range 30d by default). What Postgres holds: each node adds its
 * counts every FLUSH_INTERVAL_MS, so the figures trail the answers by up to that interval.
 */
export async function validations(
  deps: Deps,
  who: Principal,
  query: { range?: Range; product_id?: string },
): Promise<ValidationsEntry[]> {
  requireAnalyticsPlan(who)
  const productId = await productFilter(deps, who, query.product_id)
  return repo.validations(deps.sql, who.accountId, RANGES[query.range ?? '30d'], productId)
}

/** Credits consumed by metered keys per day (range 30d by default), for a product or a key. */
export async function credits(
  deps: Deps,
  who: Principal,
  query: { range?: Range; product_id?: string; key_id?: string },
): Promise<CreditsEntry[]> {
  requireAnalyticsPlan(who)
  const productId = await productFilter(deps, who, query.product_id)
  const keyId = query.key_id ?? null
  if (keyId !== null && !(isId('key', keyId) && (await repo.keyExists(deps.sql, who.accountId, keyId)))) throw notFound('key', keyId)
  return repo.credits(deps.sql, who.accountId, RANGES[query.range ?? '30d'], { productId, keyId })
}

export async function geography(deps: Deps, who: Principal): Promise<CountryEntry[]> {
  requireAnalyticsPlan(who)
  return repo.geography(deps.sql, who.accountId)
}

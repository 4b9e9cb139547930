import type { Deps } from '../../deps'
import { isId } from '../../infra/crypto'
import { AppError, notFound } from '../../core/errors'
import { PLAN_LIMITS } from '../../core/plans'
import type { Principal } from '../../core/principal'
import { RANGES, type CountryEntry, type Overview, type Range, type TrendEntry } from './model'
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

export async function activationTrend(
  deps: Deps,
  who: Principal,
  query: { range?: Range; product_id?: string },
): Promise<TrendEntry[]> {
  requireAnalyticsPlan(who)
  const productId = query.product_id ?? null
  if (productId !== null && !(isId('prod', productId) && (await repo.productExists(deps.sql, who.accountId, productId)))) {
    throw notFound('product', productId)
  }
  return repo.trend(deps.sql, who.accountId, RANGES[query.range ?? '7d'], productId)
}

export async function geography(deps: Deps, who: Principal): Promise<CountryEntry[]> {
  requireAnalyticsPlan(who)
  return repo.geography(deps.sql, who.accountId)
}

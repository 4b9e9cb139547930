import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth, problems } from '../../http/responses'
import { allows } from '../../core/scopes'
import { CreditsConsumed, CreditsQuery, Geography, Overview, Trend, TrendQuery, Validations, ValidationsQuery } from './model'
import * as service from './service'

export function analyticsRoutes(deps: Deps) {
  // The plan check runs at the transform stage like the auth macro (before query validation), so a
  // Free account is told 402 whatever its query. It only speaks for a caller that authenticates and
  // holds the scope, so the order stays 401, 403, 402 whichever of the two hooks runs first.
  const paidPlanOnly = async ({ request }: { request: Request }) => {
    const who = await deps.principals.authenticate(request.headers.get('authorization'))
    if (who && allows(who.scope, 'analytics:read')) service.requireAnalyticsPlan(who)
  }
  return new Elysia({ name: 'keyward.analytics', prefix: '/v1/analytics', detail: { tags: ['Analytics'] } })
    .use(authPlugin(deps.principals))
    .guard({ auth: 'analytics:read', transform: paidPlanOnly, response: { ...behindAuth(), ...problems(402) } }, (analytics) =>
      analytics
        .get('/overview', ({ principal }) => service.overview(deps, principal), {
          response: { 200: Overview },
          detail: { summary: "Today's figures (UTC): keys, activations, expiring keys, validate calls" },
        })
        .get('/activations', ({ principal, query }) => service.activationTrend(deps, principal, query), {
          query: TrendQuery,
          response: { 200: Trend, ...problems(404) },
          detail: { summary: 'New activations per UTC day over 7, 30 or 90 days ending today, zero-filled' },
        })
        .get('/validations', ({ principal, query }) => service.validations(deps, principal, query), {
          query: ValidationsQuery,
          response: { 200: Validations, ...problems(404) },
          detail: { summary: 'Validate answers by outcome per UTC day over 7, 30 or 90 days ending today, zero-filled' },
        })
        .get('/credits', ({ principal, query }) => service.credits(deps, principal, query), {
          query: CreditsQuery,
          response: { 200: CreditsConsumed, ...problems(404) },
          detail: { summary: 'Credits consumed by metered keys per UTC day over 7, 30 or 90 days ending today, for the account, a product or a key' },
        })
        .get('/geography', ({ principal }) => service.geography(deps, principal), {
          response: { 200: Geography },
          detail: { summary: 'Activations per country (two-letter codes), most first' },
        }),
    )
}

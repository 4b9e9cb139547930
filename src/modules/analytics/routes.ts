import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { Problem } from '../../http/schema'
import { allows } from '../../core/scopes'
import { Geography, Overview, Trend, TrendQuery } from './model'
import * as service from './service'

const refusals = { 401: Problem, 402: Problem, 403: Problem }

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
    .get('/overview', ({ principal }) => service.overview(deps, principal), {
      auth: 'analytics:read',
      transform: paidPlanOnly,
      response: { 200: Overview, ...refusals },
      detail: { summary: "Today's figures (UTC): keys, activations, expiring keys, validate calls" },
    })
    .get('/activations', ({ principal, query }) => service.activationTrend(deps, principal, query), {
      auth: 'analytics:read',
      transform: paidPlanOnly,
      query: TrendQuery,
      response: { 200: Trend, 400: Problem, ...refusals, 404: Problem },
      detail: { summary: 'New activations per UTC day over 7, 30 or 90 days ending today, zero-filled' },
    })
    .get('/geography', ({ principal }) => service.geography(deps, principal), {
      auth: 'analytics:read',
      transform: paidPlanOnly,
      response: { 200: Geography, ...refusals },
      detail: { summary: 'Activations per country (two-letter codes), most first' },
    })
}

// Who may read analytics: 401 without a valid API key, 403 without the scope, 402 on the Free plan,
// in that order; the plan check comes before query validation.
import { expect, test } from 'bun:test'
import { ADMIN_TOKEN, scopedToken, useHarness } from '../support/harness'

const h = useHarness({ socket: false })

const ROUTES = ['overview', 'activations', 'activations?range=30d', 'geography']
const OTHER_SCOPES = ['validate', 'keys:read', 'keys:write', 'keys:revoke', 'products:read', 'products:write', 'offline:write']

async function expectProblem(path: string, token: string | null, status: number, code: string) {
  const res = await h.call('GET', `/v1/analytics/${path}`, { token })
  expect({ path, status: res.status, code: res.body?.code }).toEqual({ path, status, code })
  expect(res.headers.get('content-type')).toContain('application/problem+json')
}

test('no, malformed or unknown API key: 401', async () => {
  for (const path of ROUTES) {
    await expectProblem(path, null, 401, 'unauthorized')
    await expectProblem(path, 'kw_short', 401, 'unauthorized')
    await expectProblem(path, `kw_${'a'.repeat(32)}`, 401, 'unauthorized')
  }
  const raw = await h.call('GET', '/v1/analytics/overview', { headers: { authorization: 'Basic abc' } })
  expect(raw.status).toBe(401)
})

test('every scope but analytics:read and full_access: 403, on paid and free plans alike', async () => {
  for (const plan of ['growth', 'free']) {
    const { token } = await h.account(plan)
    for (const scope of OTHER_SCOPES) {
      const scoped = await scopedToken(h.call, token, scope)
      for (const path of ROUTES) await expectProblem(path, scoped, 403, 'insufficient_scope')
      await expectProblem('activations?range=5d', scoped, 403, 'insufficient_scope')
    }
  }
})

test('Free plan: 402 plan_upgrade_required, even with a bad query', async () => {
  const { token } = await h.account('free')
  const reader = await scopedToken(h.call, token, 'analytics:read')
  for (const t of [token, reader]) {
    for (const path of [...ROUTES, 'activations?range=5d', 'activations?product_id=nope']) {
      await expectProblem(path, t, 402, 'plan_upgrade_required')
    }
  }
})

test('analytics:read and full_access on paid plans: 200', async () => {
  for (const plan of ['hobby', 'starter', 'growth', 'enterprise']) {
    const { token } = await h.account(plan)
    const reader = await scopedToken(h.call, token, 'analytics:read')
    for (const t of [token, reader]) {
      for (const path of ROUTES) expect((await h.call('GET', `/v1/analytics/${path}`, { token: t })).status).toBe(200)
    }
  }
})

test('an upgrade opens analytics at once, a downgrade closes them', async () => {
  const { id, token } = await h.account('free')
  await expectProblem('overview', token, 402, 'plan_upgrade_required')
  const up = await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'starter' } })
  expect(up.status).toBe(200)
  const open = await h.call('GET', '/v1/analytics/overview', { token })
  expect(open.status).toBe(200)
  expect(open.body.api_calls_limit_today).toBe(50_000)
  await h.call('PATCH', `/admin/accounts/${id}`, { token: ADMIN_TOKEN, body: { plan: 'free' } })
  await expectProblem('geography', token, 402, 'plan_upgrade_required')
})

test('the routes are in the OpenAPI document', async () => {
  const doc = await h.call('GET', '/docs/json')
  expect(doc.status).toBe(200)
  for (const p of ['/v1/analytics/overview', '/v1/analytics/activations', '/v1/analytics/geography']) {
    expect(doc.body.paths[p]?.get).toBeDefined()
  }
})

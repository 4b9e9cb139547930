import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, IDEMPOTENT, problems, withBody, noContent } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
import { CreatePolicyBody, ListPoliciesQuery, PatchPolicyBody, Policy, PolicyList } from './model'
import * as service from './service'

export function policyRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.policies', prefix: '/v1/policies', detail: { tags: ['Policies'] } })
    .use(authPlugin(deps.principals))
    .guard({ response: behindAuth() })
    .post(
      '',
      (ctx) =>
        createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/policies', (record) =>
          service.createPolicy(deps, ctx.principal, ctx.body, record),
        ),
      {
        auth: 'products:write',
        body: CreatePolicyBody,
        response: { 201: Policy, ...withBody(), ...problems(404, 409) },
        detail: { summary: 'Create a policy: what its keys inherit (emits policy.created)', ...IDEMPOTENT },
      },
    )
    .get('', ({ principal, query }) => service.listPolicies(deps, principal, query.product_id), {
      auth: 'products:read',
      query: ListPoliciesQuery,
      response: { 200: PolicyList },
      detail: { summary: 'List policies, oldest first (optionally of one product)' },
    })
    .guard({ params: IdParam(), response: problems(404) }, (byId) =>
      byId
        .get('/:id', ({ principal, params }) => service.getPolicy(deps, principal, params.id), {
          auth: 'products:read',
          response: { 200: Policy },
          detail: { summary: 'A policy with the number of keys that reference it' },
        })
        .patch('/:id', ({ principal, params, body }) => service.patchPolicy(deps, principal, params.id, body), {
          auth: 'products:write',
          body: PatchPolicyBody,
          response: { 200: Policy, ...withBody() },
          detail: {
            summary: 'Change a policy, in force for every key that inherits from it on every node before this returns (emits policy.updated when a value changed)',
            description: 'duration applies to keys created afterwards only: computed expiries do not move.',
          },
        })
        .delete(
          '/:id',
          ({ principal, params, set }) => noContent(set, service.deletePolicy(deps, principal, params.id)),
          {
            auth: 'products:write',
            response: { 204: t.Void(), ...problems(409) },
            detail: { summary: 'Delete a policy no key references (409 policy_in_use otherwise; emits policy.deleted)' },
          },
        ),
    )
}

// Operator routes (the back office). Mounted only when ADMIN_TOKEN is configured; otherwise 404.
import { timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { AppError } from '../../core/errors'
import { IdParam, Problem, t } from '../../http/schema'
import { sha256Hex } from '../../infra/crypto'
import { ApiKeyWithToken, CreateApiKeyBody } from '../api-keys/model'
import { Account, AccountPage, AccountWithUsage, CreateAccountBody, ListAccountsQuery, UpdateAccountBody } from './model'
import * as service from './service'

export function adminRoutes(deps: Deps) {
  const app = new Elysia({ name: 'keyward.admin', prefix: '/admin' })
  const adminToken = deps.config.adminToken
  if (!adminToken) return app
  const expected = Buffer.from(sha256Hex(adminToken))
  return app
    // transform, not beforeHandle: it runs before body validation, so a caller without the token gets
    // 401 whatever it sends and learns nothing about the schema.
    .onTransform(({ request }) => {
      const header = request.headers.get('authorization') ?? ''
      const token = /^bearer (.+)$/i.exec(header)?.[1] ?? ''
      const given = Buffer.from(sha256Hex(token))
      if (!timingSafeEqual(given, expected)) throw new AppError('unauthorized', 'Missing or wrong operator token')
    })
    .post(
      '/accounts',
      async ({ body, set }) => {
        set.status = 201
        return service.createAccount(deps.sql, body, deps.secretKey)
      },
      {
        body: CreateAccountBody,
        response: { 201: t.Object({ account: Account, api_key: ApiKeyWithToken }), 400: Problem, 401: Problem },
        detail: { tags: ['Operator'], summary: 'Create an account and its first full_access API key', security: [{ admin: [] }] },
      },
    )
    .get('/accounts', ({ query }) => service.listAccounts(deps.sql, query), {
      query: ListAccountsQuery,
      response: { 200: AccountPage, 400: Problem, 401: Problem },
      detail: {
        tags: ['Operator'],
        summary: 'List accounts, newest first, with usage counts; q = name or id prefix',
        security: [{ admin: [] }],
      },
    })
    .get('/accounts/:id', ({ params }) => service.getAccount(deps, params.id), {
      params: IdParam(),
      response: { 200: AccountWithUsage, 401: Problem, 404: Problem },
      detail: { tags: ['Operator'], summary: 'An account with usage counts', security: [{ admin: [] }] },
    })
    .patch('/accounts/:id', ({ params, body }) => service.updateAccount(deps, params.id, body), {
      params: IdParam(),
      body: UpdateAccountBody,
      response: { 200: Account, 400: Problem, 401: Problem, 404: Problem },
      detail: { tags: ['Operator'], summary: 'Rename or change plan (emits account.plan_changed)', security: [{ admin: [] }] },
    })
    .post(
      '/accounts/:id/api-keys',
      async ({ params, body, set }) => {
        set.status = 201
        return service.issueApiKey(deps.sql, params.id, body)
      },
      {
        params: IdParam(),
        body: CreateApiKeyBody,
        response: { 201: ApiKeyWithToken, 400: Problem, 401: Problem, 404: Problem },
        detail: {
          tags: ['Operator'],
          summary: 'Issue an API key to an existing account (recovery; the token is shown once)',
          security: [{ admin: [] }],
        },
      },
    )
}

// Operator routes (the back office). Mounted only when ADMIN_TOKEN is configured; otherwise 404.
import { timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { AppError } from '../../core/errors'
import { problems, withBody } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
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
    // Every operator route: 400 for a NUL in the query, 401 without the token, 404 on a node without
    // ADMIN_TOKEN (the routes are not mounted), 503 when Postgres is unreachable.
    .guard({ response: problems(400, 401, 404, 503), detail: { tags: ['Operator'], security: [{ admin: [] }] } }, (admin) =>
      admin
        .post(
          '/accounts',
          async ({ body, set }) => {
            set.status = 201
            return service.createAccount(deps.sql, body, deps.secretKey)
          },
          {
            body: CreateAccountBody,
            response: { 201: t.Object({ account: Account, api_key: ApiKeyWithToken }), ...withBody() },
            detail: { summary: 'Create an account and its first full_access API key' },
          },
        )
        .get('/accounts', ({ query }) => service.listAccounts(deps.sql, query), {
          query: ListAccountsQuery,
          response: { 200: AccountPage },
          detail: { summary: 'List accounts, newest first, with usage counts; q = name or id prefix' },
        })
        .guard({ params: IdParam() }, (byId) =>
          byId
            .get('/accounts/:id', ({ params }) => service.getAccount(deps, params.id), {
              response: { 200: AccountWithUsage },
              detail: { summary: 'An account with usage counts' },
            })
            .patch('/accounts/:id', ({ params, body }) => service.updateAccount(deps, params.id, body), {
              body: UpdateAccountBody,
              response: { 200: Account, ...withBody() },
              detail: { summary: 'Rename or change plan (emits account.plan_changed)' },
            })
            .post(
              '/accounts/:id/api-keys',
              async ({ params, body, set }) => {
                set.status = 201
                return service.issueApiKey(deps.sql, params.id, body)
              },
              {
                body: CreateApiKeyBody,
                response: { 201: ApiKeyWithToken, ...withBody() },
                detail: { summary: 'Issue an API key to an existing account (recovery; the token is shown once)' },
              },
            ),
        ),
    )
}

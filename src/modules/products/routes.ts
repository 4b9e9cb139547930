import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { IdParam, Problem, t } from '../../http/schema'
import { CreateProductBody, Product, ProductList, UpdateProductBody } from './model'
import * as service from './service'

export function productRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.products', prefix: '/v1/products', detail: { tags: ['Products'] } })
    .use(authPlugin(deps.principals))
    .post(
      '',
      (ctx) =>
        createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/products', (record) =>
          service.createProduct(deps, ctx.principal, ctx.body, record),
        ),
      {
        auth: 'products:write',
        body: CreateProductBody,
        response: { 201: Product, 400: Problem, 401: Problem, 402: Problem, 403: Problem, 409: Problem },
        detail: { summary: 'Create a product (emits product.created)' },
      },
    )
    .get('', async ({ principal }) => ({ data: await service.listProducts(deps, principal) }), {
      auth: 'products:read',
      response: { 200: ProductList, 401: Problem, 403: Problem },
      detail: { summary: 'List products, oldest first' },
    })
    .get('/:id', ({ principal, params }) => service.getProduct(deps, principal, params.id), {
      auth: 'products:read',
      params: IdParam(),
      response: { 200: Product, 401: Problem, 403: Problem, 404: Problem },
      detail: { summary: 'A product with its active key and activation counts' },
    })
    .put('/:id', ({ principal, params, body }) => service.updateProduct(deps, principal, params.id, body), {
      auth: 'products:write',
      params: IdParam(),
      body: UpdateProductBody,
      response: { 200: Product, 400: Problem, 401: Problem, 403: Problem, 404: Problem },
      detail: { summary: 'Rename or redescribe a product (the slug is immutable)' },
    })
    .delete(
      '/:id',
      async ({ principal, params, set }) => {
        await service.deleteProduct(deps, principal, params.id)
        set.status = 204
      },
      {
        auth: 'products:write',
        params: IdParam(),
        response: { 204: t.Void(), 401: Problem, 403: Problem, 404: Problem, 422: Problem },
        detail: { summary: 'Delete a product with no active keys (its other keys go with it)' },
      },
    )
}

import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { createOnce } from '../../http/idempotency'
import { behindAuth, IDEMPOTENT, problems, withBody, noContent } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
import { CreateProductBody, Product, ProductList, UpdateProductBody } from './model'
import * as service from './service'

export function productRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.products', prefix: '/v1/products', detail: { tags: ['Products'] } })
    .use(authPlugin(deps.principals))
    .guard({ response: behindAuth() })
    .post(
      '',
      (ctx) =>
        createOnce(ctx, deps.sql, ctx.principal.accountId, 'POST /v1/products', (record) =>
          service.createProduct(deps, ctx.principal, ctx.body, record),
        ),
      {
        auth: 'products:write',
        body: CreateProductBody,
        response: { 201: Product, ...withBody(), ...problems(402, 409) },
        detail: { summary: 'Create a product (emits product.created)', ...IDEMPOTENT },
      },
    )
    .get('', async ({ principal }) => ({ data: await service.listProducts(deps, principal) }), {
      auth: 'products:read',
      response: { 200: ProductList },
      detail: { summary: 'List products, oldest first' },
    })
    .guard({ params: IdParam(), response: problems(404) }, (byId) =>
      byId
        .get('/:id', ({ principal, params }) => service.getProduct(deps, principal, params.id), {
          auth: 'products:read',
          response: { 200: Product },
          detail: { summary: 'A product with its active key and activation counts' },
        })
        .put('/:id', ({ principal, params, body }) => service.updateProduct(deps, principal, params.id, body), {
          auth: 'products:write',
          body: UpdateProductBody,
          response: { 200: Product, ...withBody() },
          detail: { summary: 'Rename or redescribe a product (the slug is immutable)' },
        })
        .delete(
          '/:id',
          ({ principal, params, set }) => noContent(set, service.deleteProduct(deps, principal, params.id)),
          {
            auth: 'products:write',
            response: { 204: t.Void(), ...problems(422) },
            detail: { summary: 'Delete a product with no active keys (its other keys go with it)' },
          },
        ),
    )
}

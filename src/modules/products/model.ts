import { PlainText, t, Timestamp } from '../../http/schema'

const ProductName = PlainText(1, 200, { minLength: 1, maxLength: 200, description: 'The product\'s name: 1..200 characters, no control characters' })

export const SLUG_PATTERN = '^[a-z0-9]+(-[a-z0-9]+)*$'

export const Product = t.Object({
  id: t.String({ examples: ['prod_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  name: t.String(),
  slug: t.String(),
  description: t.Union([t.String(), t.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
  active_keys: t.Integer({ description: 'Keys whose effective status is active' }),
  total_activations: t.Integer({ description: 'Every activation ever recorded for the product\'s keys' }),
  offline_portal: t.Boolean({
    description: 'Whether the product\'s end-user page for air-gapped activation (GET /portal/:product_id/offline) and its two routes are on (default false)',
  }),
})
export type Product = typeof Product.static

export const CreateProductBody = t.Object({
  name: ProductName,
  slug: t.String({ minLength: 1, maxLength: 64, pattern: SLUG_PATTERN }),
  description: t.Optional(t.Union([t.String({ maxLength: 2000 }), t.Null()])),
})
export type CreateProductBody = typeof CreateProductBody.static

export const UpdateProductBody = t.Object({
  name: t.Optional(ProductName),
  description: t.Optional(t.Union([t.String({ maxLength: 2000 }), t.Null()])),
  slug: t.Optional(t.String({ description: 'Immutable: accepted only when equal to the current slug' })),
  offline_portal: t.Optional(t.Boolean({ description: 'Turns the product\'s end-user page for air-gapped activation on or off' })),
})
export type UpdateProductBody = typeof UpdateProductBody.static

export const ProductList = t.Object({ data: t.Array(Product) })
export type ProductList = typeof ProductList.static

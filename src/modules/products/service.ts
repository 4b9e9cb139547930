import type { Deps } from '../../deps'
import { KEYS_PER_MESSAGE } from '../../infra/bus'
import type { RecordCreated } from '../../infra/record-created'
import { isId, newId } from '../../infra/crypto'
import { AppError, invalid, notFound, foundById } from '../../core/errors'
import type { Principal } from '../../core/principal'
import { lockUnderPlanLimit } from '../accounts/plan-limit'
import { byApiKey, emit } from '../events/outbox'
import type { CreateProductBody, Product, UpdateProductBody } from './model'
import * as repo from './repo'

/** `record` (Idempotency-Key) stores the response in the create's transaction. */
export async function createProduct(deps: Deps, who: Principal, input: CreateProductBody, record?: RecordCreated): Promise<Product> {
  return deps.sql.begin(async (tx) => {
    await lockUnderPlanLimit(tx, who.accountId, 'products', repo.countProducts)
    const product = await repo.insertProduct(tx, {
      id: newId('prod'),
      accountId: who.accountId,
      name: input.name,
      slug: input.slug,
      description: input.description ?? null,
    })
    if (!product) throw new AppError('slug_taken', `The slug ${input.slug} is already used in this account`)
    await emit(tx, who.accountId, 'product.created', product, byApiKey(who))
    return record ? record(tx, product) : product
  })
}

export async function getProduct(deps: Deps, who: Principal, id: string): Promise<Product> {
  return foundById('prod', 'product', id, () => repo.findProduct(deps.sql, who.accountId, id))
}

export const listProducts = (deps: Deps, who: Principal) => repo.listProducts(deps.sql, who.accountId)

export async function updateProduct(deps: Deps, who: Principal, id: string, input: UpdateProductBody): Promise<Product> {
  return deps.sql.begin(async (tx) => {
    const current = isId('prod', id) ? await repo.lockProduct(tx, who.accountId, id) : null
    if (!current) throw notFound('product', id)
    if (input.slug !== undefined && input.slug !== current.slug) throw invalid('body.slug', 'is immutable')
    const before = (await repo.findProduct(tx, who.accountId, id))!
    await repo.updateProduct(tx, who.accountId, id, input)
    const product = (await repo.findProduct(tx, who.accountId, id))!
    // emitted only when a value changed (like key.updated)
    if (product.name !== before.name || product.description !== before.description || product.offline_portal !== before.offline_portal) await emit(tx, who.accountId, 'product.updated', product, byApiKey(who))
    return product
  })
}

export async function deleteProduct(deps: Deps, who: Principal, id: string): Promise<void> {
  const keyHashes = await deps.sql.begin(async (tx) => {
    const current = isId('prod', id) ? await repo.lockProduct(tx, who.accountId, id) : null
    if (!current) throw notFound('product', id)
    // Creating a key locks the product row too (for share), so no key can appear after this check.
    if (await repo.hasActiveKeys(tx, id)) {
      throw new AppError('product_has_active_keys', 'Revoke or let expire every key of this product first')
    }
    const product = (await repo.findProduct(tx, who.accountId, id))!
    const keyHashes = await repo.deleteProduct(tx, id)
    await emit(tx, who.accountId, 'product.deleted', product, byApiKey(who))
    return keyHashes
  })
  // The deleted (revoked/expired) keys may sit in hot state; they must answer not_found from now on.
  for (let i = 0; i < keyHashes.length; i += KEYS_PER_MESSAGE) {
    await deps.bus.publish({ kind: 'keys', keyHashes: keyHashes.slice(i, i + KEYS_PER_MESSAGE) })
  }
}

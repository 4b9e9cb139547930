import type { Sql, Tx } from '../../infra/db'
import { isoDates, type Dated } from '../../core/values'
import type { Product } from './model'

type Row = Dated<Product, 'created_at' | 'updated_at'>
const toProduct = (r: Row): Product => isoDates(r, ['created_at', 'updated_at'])

// Counts computed from the record, with the effective status (an expired-by-time key is not active).
const withCounts = (sql: Sql | Tx) => sql`
  p.id, p.name, p.slug, p.description, p.created_at, p.updated_at, p.offline_portal,
  (select count(*)::int from license_keys k where k.product_id = p.id and k.status = 'active'
     and (k.expires_at is null or k.expires_at > now())) as active_keys,
  (select count(*)::int from activations a where a.product_id = p.id) as total_activations`

export async function insertProduct(
  tx: Tx,
  p: { id: string; accountId: string; name: string; slug: string; description: string | null },
): Promise<Product | null> {
  const [row] = await tx<{ id: string }[]>`insert into products (id, account_id, name, slug, description)
    values (${p.id}, ${p.accountId}, ${p.name}, ${p.slug}, ${p.description})
    on conflict (account_id, slug) do nothing returning id`
  return row ? findProduct(tx, p.accountId, row.id) : null
}

export async function findProduct(sql: Sql | Tx, accountId: string, id: string): Promise<Product | null> {
  const [row] = await sql<Row[]>`select ${withCounts(sql)} from products p where p.id = ${id} and p.account_id = ${accountId}`
  return row ? toProduct(row) : null
}

export async function listProducts(sql: Sql, accountId: string): Promise<Product[]> {
  const rows = await sql<Row[]>`select ${withCounts(sql)} from products p where p.account_id = ${accountId}
    order by p.created_at, p.id`
  return rows.map(toProduct)
}

export async function countProducts(tx: Tx, accountId: string): Promise<number> {
  const [{ n }] = await tx<{ n: number }[]>`select count(*)::int as n from products where account_id = ${accountId}`
  return n
}

export async function updateProduct(
  tx: Tx,
  accountId: string,
  id: string,
  patch: { name?: string; description?: string | null; offline_portal?: boolean },
): Promise<boolean> {
  const hasDescription = patch.description !== undefined
  const rows = await tx`update products set
      name = coalesce(${patch.name ?? null}, name),
      offline_portal = coalesce(${patch.offline_portal ?? null}::boolean, offline_portal),
      description = case when ${hasDescription} then ${patch.description ?? null} else description end,
      updated_at = now()
    where id = ${id} and account_id = ${accountId} returning id`
  return rows.length > 0
}

export async function lockProduct(tx: Tx, accountId: string, id: string): Promise<{ slug: string } | null> {
  const [row] = await tx<{ slug: string }[]>`select slug from products where id = ${id} and account_id = ${accountId} for update`
  return row ?? null
}

export async function hasActiveKeys(tx: Tx, productId: string): Promise<boolean> {
  const [row] = await tx`select 1 from license_keys where product_id = ${productId} and status = 'active'
    and (expires_at is null or expires_at > now()) limit 1`
  return !!row
}

/** Deletes the product; its (revoked/expired) keys and their activations go with it (on delete cascade). */
/** Returns the key hashes that went with it, so caches can drop them. */
export async function deleteProduct(tx: Tx, id: string): Promise<string[]> {
  const keys = await tx<{ key_hash: string }[]>`select key_hash from license_keys where product_id = ${id}`
  await tx`delete from products where id = ${id}`
  return keys.map((k) => k.key_hash)
}

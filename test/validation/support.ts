// Helpers shared by the validation tests.
import type { Sql } from '../../src/infra/db'
import type { Client, Harness } from '../support/harness'
import { newKey, newProduct } from '../support/harness'
import type { KeyRow } from '../../src/modules/validation/hot/hot-state'

export { fingerprint } from '../support/harness'

export function validate(call: Client, token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return call('POST', '/v1/validate', { token, body, headers })
}

/** A fresh account (plan) with one product and one key (extra key fields). */
export async function setup(h: Harness, key: Record<string, unknown> = {}, plan = 'growth') {
  const { id: accountId, token } = await h.account(plan)
  const product = await newProduct(h.call, token)
  const created = await newKey(h.call, token, product.id, key)
  return { accountId, token, product, key: created as { id: string; key_value: string; product_id: string } }
}

/** Outbox events of `type` about one key (activation events carry key_id, key events are the key). */
export async function events(sql: Sql, type: string, keyId: string): Promise<{ id: string; data: any }[]> {
  return sql<{ id: string; data: any }[]>`select id, data from events where type = ${type}
    and (data->>'key_id' = ${keyId} or data->>'id' = ${keyId}) order by seq`
}

export async function activationRows(sql: Sql, keyId: string) {
  return sql<{ id: string; device_fingerprint: string; status: string }[]>`select id, device_fingerprint, status
    from activations where key_id = ${keyId} order by activated_at, id`
}

export { until } from '../support/wait'

/** A hot-state row for the cache's own rules (an active key of acct_1 / prod_1 with 3 slots), with overrides. */
export const keyRow = (over: Partial<KeyRow> = {}): KeyRow => ({
  accountId: 'acct_1',
  productId: 'prod_1',
  status: 'active',
  plan: null,
  expiresAt: null,
  limit: 3,
  devices: [],
  entitlements: {},
  graceMs: 0,
  keep: false,
  policyId: null,
  own: null,
  oneKeyPerDevice: false,
  metered: false,
  relaySeats: 0,
  ...over,
})

import { EVENT_TYPES } from '../../src/modules/events/outbox'
import type { Client } from '../support/harness'

/**
 * The types these tests subscribe to: every type but the audit ones docs/api.md, "CORS" added for changes to
 * products, API keys and webhooks themselves, so a webhook receives only what a test does to keys,
 * products and activations (creating a webhook no longer floods the others with webhook.created).
 */
const AUDIT_TYPES: readonly string[] = ['product.updated', 'product.deleted', 'api_key.rotated', 'api_key.deleted', 'webhook.created', 'webhook.updated', 'webhook.deleted']
export const ALL_EVENTS = EVENT_TYPES.filter((type) => !AUDIT_TYPES.includes(type))

/** Env for a node that may deliver to the local receiver, with short retry delays. */
export const LOCAL_DELIVERY = {
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  WEBHOOK_RETRY_DELAYS_MS: '100,100,100',
  WEBHOOK_TIMEOUT_MS: '3000',
}

export async function newWebhook(call: Client, token: string, url: string, events: string[] = ALL_EVENTS) {
  const res = await call('POST', '/v1/webhooks', { token, body: { url, events } })
  if (res.status !== 201) throw new Error(`webhook creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body as { id: string; secret: string; url: string; events: string[]; is_active: boolean }
}

export { fingerprint } from '../support/harness'

/** An object without some of its fields (e.g. a create response without key_value). */
export function without<T extends Record<string, unknown>>(obj: T, ...fields: string[]): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...obj }
  for (const f of fields) delete copy[f]
  return copy
}

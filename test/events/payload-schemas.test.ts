// Every event type the service emits, produced through the API (and the two background jobs that emit:
// expiry and inactivity release), checked against the delivery body the server documents for it (the
// OpenAPI document's `webhooks`, built from EVENT_DATA). A payload missing a required field (the
// inactivity release once sent activations without device_name) fails here.
import { expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { EVENT_TYPES, type EventType } from '../../src/core/events'
import { releaseInactiveActivations } from '../../src/modules/activations/inactivity-release'
import { sweepExpiredKeys } from '../../src/modules/keys/expiry-sweeper'
import { activateDueKeys } from '../../src/modules/signing/service'
import { eventBody } from '../../src/modules/webhooks/model'
import { ADMIN_TOKEN, fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { createRelay, relayIdentity, requestCode } from '../support/relays'

const h = useHarness({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }, socket: false })

type Row = { id: string; type: EventType; data: unknown; actor_type: string; actor_id: string | null; created_at: Date }

test('every event type is produced, and each payload matches its documented schema', async () => {
  const { id: accountId, token } = await h.account('starter')
  const ok = (res: { status: number; body: unknown }, what: string) => {
    if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body as any
  }
  const sql = h.node.deps.sql

  // products, keys, their changes
  const product = await newProduct(h.call, token)
  ok(await h.call('PUT', `/v1/products/${product.id}`, { token, body: { name: 'Renamed' } }), 'product.updated')
  const key = await newKey(h.call, token, product.id, { activation_limit: 3, release_after_seconds: 3600 })
  ok(await h.call('PATCH', `/v1/keys/${key.id}`, { token, body: { activation_limit: 4 } }), 'key.updated')
  ok(await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: new Date(Date.now() + 86_400_000).toISOString() } }), 'key.extended')

  // activations: created, then released by the holder, the admin and the inactivity job
  const [byHolder, byAdmin, idle] = [fingerprint(), fingerprint(), fingerprint()]
  for (const device of [byHolder, byAdmin, idle]) {
    const answer = ok(await h.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device, device_name: 'Laptop' } }), 'validate')
    expect(answer.valid).toBe(true)
  }
  expect(ok(await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: byHolder } }), 'deactivate').deactivated).toBe(true)
  const [admin] = await sql<{ id: string }[]>`select id from activations where key_id = ${key.id} and device_fingerprint = ${byAdmin}`
  ok(await h.call('DELETE', `/v1/keys/${key.id}/activations/${admin!.id}`, { token }), 'admin release')
  await sql`update activations set last_validated_at = now() - interval '2 hours', activated_at = now() - interval '2 hours'
    where key_id = ${key.id} and device_fingerprint = ${idle}`
  await h.node.deps.validation.flush()
  await releaseInactiveActivations(h.node.deps, { graceMs: 0 })
  const [released] = await sql<{ status: string }[]>`select status from activations where key_id = ${key.id} and device_fingerprint = ${idle}`
  expect(released!.status).toBe('deactivated')

  // machine identity: a reinstalled machine (new fingerprint, matching components) is rebound
  const identity = await newKey(h.call, token, product.id, { component_match: 'most' })
  const parts = { machine_id: 'a'.repeat(64), disk: 'b'.repeat(64), cpu: 'c'.repeat(64) }
  ok(await h.call('POST', '/v1/validate', { token, body: { key: identity.key_value, device_fingerprint: fingerprint(), components: parts } }), 'validate')
  const rebound = ok(await h.call('POST', '/v1/validate', { token, body: { key: identity.key_value, device_fingerprint: fingerprint(), components: { ...parts, cpu: 'd'.repeat(64) } } }), 'rebind')
  expect(rebound.valid).toBe(true)

  // a relay licensed for seats of a key, then deleted
  const relayed = await newKey(h.call, token, product.id, { activation_limit: 3 })
  const relay = ok(await createRelay(h.call, token, relayed.id, { request: requestCode(relayIdentity()), seats: 2 }), 'relay create')
  ok(await h.call('DELETE', `/v1/relays/${relay.relay_id}`, { token }), 'relay delete')

  // expiry (the sweeper), revocation
  const expiring = await newKey(h.call, token, product.id, { expires_at: new Date(Date.now() + 86_400_000).toISOString() })
  await sql`update license_keys set expires_at = now() - interval '1 second' where id = ${expiring.id}`
  await sweepExpiredKeys(sql)
  ok(await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} }), 'key.revoked')

  // API keys, webhooks, the product's deletion, the plan
  const apiKey = ok(await h.call('POST', '/v1/api-keys', { token, body: { name: 'CI', scope: 'keys:read' } }), 'api_key.created')
  ok(await h.call('POST', `/v1/api-keys/${apiKey.id}/rotate`, { token }), 'api_key.rotated')
  ok(await h.call('DELETE', `/v1/api-keys/${apiKey.id}`, { token }), 'api_key.deleted')
  const webhook = ok(await h.call('POST', '/v1/webhooks', { token, body: { url: 'http://127.0.0.1:9/hook', events: ['key.created'] } }), 'webhook.created')
  ok(await h.call('PATCH', `/v1/webhooks/${webhook.id}`, { token, body: { is_active: false } }), 'webhook.updated')
  ok(await h.call('DELETE', `/v1/webhooks/${webhook.id}`, { token }), 'webhook.deleted')
  // suspend, reinstate, reissue; policies
  const paused = await newKey(h.call, token, product.id)
  ok(await h.call('POST', `/v1/keys/${paused.id}/suspend`, { token, body: { reason: 'audit' } }), 'key.suspended')
  ok(await h.call('POST', `/v1/keys/${paused.id}/reinstate`, { token }), 'key.reinstated')
  ok(await h.call('POST', `/v1/keys/${paused.id}/reissue`, { token }), 'key.reissued')
  // credits: updated by the admin, exhausted by a consume
  const metered = await newKey(h.call, token, product.id, { credits: { remaining: 1 } })
  ok(await h.call('POST', `/v1/keys/${metered.id}/credits`, { token, body: { operation: 'add', amount: 1 } }), 'key.credits_updated')
  expect(ok(await h.call('POST', '/v1/validate', { token, body: { key: metered.key_value, device_fingerprint: fingerprint(), cost: 2 } }), 'validate').valid).toBe(true)
  const policy = ok(await h.call('POST', '/v1/policies', { token, body: { product_id: product.id, name: 'Pro', entitlements: { export: true } } }), 'policy.created')
  ok(await h.call('PATCH', `/v1/policies/${policy.id}`, { token, body: { activation_limit: 5 } }), 'policy.updated')
  ok(await h.call('DELETE', `/v1/policies/${policy.id}`, { token }), 'policy.deleted')
  const imported = ok(await h.call('POST', '/v1/keys/import', { token, body: { rows: [{ key: 'imported-value-1', product_id: product.id }] } }), 'keys.imported')
  expect(imported.created).toBe(1)

  // signing keys: created, activated (by the caller, and by the sweeper at a scheduled time), revoked
  const signing = ok(await h.call('POST', '/v1/signing-keys', { token, body: {} }), 'signing_key.created')
  ok(await h.call('POST', `/v1/signing-keys/${signing.kid}/activate`, { token }), 'signing_key.activated')
  ok(await h.call('POST', `/v1/signing-keys/${signing.kid}/revoke`, { token, body: { reason: 'rotation drill' } }), 'signing_key.revoked')
  const scheduled = ok(await h.call('POST', '/v1/signing-keys', { token, body: { activate_at: new Date(Date.now() + 60_000).toISOString() } }), 'signing_key.created')
  await sql`update signers set activate_at = now() - interval '1 second' where kid = ${scheduled.kid}`
  expect(await activateDueKeys(h.node.deps)).toBe(1)

  const spare = await newProduct(h.call, token)
  ok(await h.call('DELETE', `/v1/products/${spare.id}`, { token }), 'product.deleted')
  ok(await h.call('PATCH', `/admin/accounts/${accountId}`, { token: ADMIN_TOKEN, body: { plan: 'growth' } }), 'account.plan_changed')

  const rows = await sql<Row[]>`select id, type, data, actor_type, actor_id, created_at from events where account_id = ${accountId} order by seq`
  expect([...new Set(rows.map((r) => r.type))].sort()).toEqual([...EVENT_TYPES].sort())
  const reasons = rows.filter((r) => r.type === 'activation.deactivated').map((r: any) => r.data.activation.deactivation_reason)
  expect(reasons.sort()).toEqual(['admin', 'inactive', 'user'])

  // Each as a webhook receiver gets it (webhooks/signer.ts builds the same body), against its documented schema.
  const mismatches = rows.flatMap((r) => {
    const body = { id: r.id, type: r.type, timestamp: r.created_at.toISOString(), actor: { type: r.actor_type, id: r.actor_id }, data: r.data }
    return [...Value.Errors(eventBody(r.type), body)].map((e) => `${r.type} (${JSON.stringify(r.data).slice(0, 80)}…): ${e.path} ${e.message}`)
  })
  expect(mismatches).toEqual([])
})

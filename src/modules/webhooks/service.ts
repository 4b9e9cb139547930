import type { Deps } from '../../deps'
import type { RecordCreated } from '../../infra/record-created'
import { isId, newId, open, seal } from '../../infra/crypto'
import { invalid, notFound, foundById } from '../../core/errors'
import type { Principal } from '../../core/principal'
import { lockUnderPlanLimit } from '../accounts/plan-limit'
import { byApiKey, emit, type EventType } from '../events/outbox'
import type { CreateWebhookBody, DeliveryAttempt, UpdateWebhookBody, Webhook, WebhookWithSecret } from './model'
import * as repo from './repo'
import type { Key } from '../keys/model'
import { send } from './sender'
import { newWebhookSecret, signEvent } from './signer'
import { resolveTarget } from './ssrf'

/** A URL the service may deliver to, else 400 (syntax, scheme, or a non-public address). */
async function checkUrl(deps: Deps, url: string): Promise<void> {
  const target = await resolveTarget(url, deps.config.webhookAllowPrivateUrls)
  if (!target.ok) throw invalid('body.url', target.reason)
}

const unique = (events: EventType[]) => [...new Set(events)]

/**
 * Creates a webhook. What createOnce stores for Idempotency-Key replays (`record`, in the create's
 * transaction) is this return value, so the secret travels sealed (`secret_sealed`) and is opened per
 * response by `revealSecret`.
 */
export async function createWebhook(
  deps: Deps,
  who: Principal,
  input: CreateWebhookBody,
  record?: RecordCreated,
): Promise<Webhook & { secret_sealed: string }> {
  await checkUrl(deps, input.url)
  const secret = newWebhookSecret()
  const secretSealed = seal(deps.secretKey, secret)
  return deps.sql.begin(async (tx) => {
    await lockUnderPlanLimit(tx, who.accountId, 'webhooks', repo.countWebhooks)
    const webhook = await repo.insertWebhook(tx, {
      id: newId('wh'),
      accountId: who.accountId,
      url: input.url,
      events: unique(input.events),
      secretSealed,
    })
    await emit(tx, who.accountId, 'webhook.created', webhook, byApiKey(who)) // the webhook without its secret
    const created = { ...webhook, secret_sealed: secretSealed }
    return record ? record(tx, created) : created
  })
}

export function revealSecret(deps: Deps, stored: Webhook & { secret_sealed: string }): WebhookWithSecret {
  const { secret_sealed, ...webhook } = stored
  return { ...webhook, secret: open(deps.secretKey, secret_sealed).toString('utf8') }
}

export const listWebhooks = (deps: Deps, who: Principal) => repo.listWebhooks(deps.sql, who.accountId)

async function findOr404(deps: Deps, who: Principal, id: string): Promise<Webhook> {
  return foundById('wh', 'webhook', id, () => repo.findWebhook(deps.sql, who.accountId, id))
}

export async function getWebhook(deps: Deps, who: Principal, id: string) {
  const webhook = await findOr404(deps, who, id)
  return { ...webhook, deliveries: await repo.recentAttempts(deps.sql, id) }
}

export async function updateWebhook(deps: Deps, who: Principal, id: string, input: UpdateWebhookBody): Promise<Webhook> {
  if (!isId('wh', id)) throw notFound('webhook', id)
  if (input.url !== undefined) await checkUrl(deps, input.url)
  const result = await deps.sql.begin(async (tx) => {
    const before = await repo.findWebhook(tx, who.accountId, id)
    const updated = await repo.updateWebhook(tx, who.accountId, id, {
      url: input.url,
      events: input.events && unique(input.events),
      isActive: input.is_active,
    })
    if (updated && updated.wasActive && !updated.webhook.is_active) await repo.cancelPending(tx, id)
    if (updated && before && changedWebhook(before, updated.webhook)) await emit(tx, who.accountId, 'webhook.updated', updated.webhook, byApiKey(who))
    return updated
  })
  if (!result) throw notFound('webhook', id)
  return result.webhook
}

/** webhook.updated is emitted only when a value changed (like key.updated). */
const changedWebhook = (a: Webhook, b: Webhook) =>
  a.url !== b.url || a.is_active !== b.is_active || a.events.length !== b.events.length || a.events.some((e, i) => e !== b.events[i])

export async function deleteWebhook(deps: Deps, who: Principal, id: string): Promise<void> {
  const deleted = isId('wh', id) &&
    (await repo.deleteWebhook(deps.sql, who.accountId, id, (tx, webhook) => emit(tx, who.accountId, 'webhook.deleted', webhook, byApiKey(who))))
  if (!deleted) throw notFound('webhook', id)
}

/**
 * Sample `key.created` data: a complete key object (typed as the event's documented `Key`, so a field
 * added to keys cannot be left out here), with obviously fake values.
 */
function sampleKey(): Key {
  const now = new Date().toISOString()
  return {
    id: newId('key'),
    product_id: newId('prod'),
    plan: 'pro',
    status: 'active',
    activation_limit: 3,
    activations_used: 0,
    expires_at: null,
    created_at: now,
    revoked_at: null,
    revoke_reason: null,
    suspended_at: null,
    suspend_reason: null,
    suspended_until: null,
    metadata: { test: true },
    key_prefix: 'TEST0',
    release_after_seconds: null,
    deactivations_allowed: null,
    deactivations_used: 0,
    entitlements: { export: true },
    grace_seconds: 0,
    after_expiry: 'refuse',
    component_match: 'off',
    policy_id: null,
    expiry_pending: false,
    external_id: null,
    overrides: {},
    credits: null,
    customer: { email: 'jane@example.com', name: 'Jane Example', external_id: 'cus_test' },
  }
}

/**
 * Sends a sample `key.created` event now, whatever the webhook's events and is_active, and logs the
 * attempt (attempt 1, never retried; a 410 answer disables the webhook as usual). The sample event is not written to the outbox: no other webhook
 * receives it.
 */
export async function testWebhook(deps: Deps, who: Principal, id: string): Promise<{ delivery: DeliveryAttempt }> {
  const found = isId('wh', id) ? await repo.findSecret(deps.sql, who.accountId, id) : null
  if (!found) throw notFound('webhook', id)
  const eventId = newId('evt')
  const message = signEvent(open(deps.secretKey, found.sealed).toString('utf8'), {
    id: eventId,
    type: 'key.created',
    createdAt: new Date(),
    actor: byApiKey(who),
    data: sampleKey(),
  })
  const outcome = await send(found.url, message, {
    allowPrivate: deps.config.webhookAllowPrivateUrls,
    timeoutMs: deps.config.webhookTimeoutMs,
  })
  const delivery = await repo.insertTestAttempt(deps.sql, {
    id: newId('whd'),
    webhookId: id,
    accountId: who.accountId,
    event_id: eventId,
    event_type: 'key.created',
    attempt: 1,
    status_code: outcome.statusCode,
    success: outcome.success,
    duration_ms: outcome.durationMs,
    error: outcome.error,
  })
  if (!delivery) throw notFound('webhook', id) // deleted while the test was in flight
  if (outcome.statusCode === 410) {
    // 410 Gone disables the webhook, whichever send received it.
    await deps.sql.begin(async (tx) => {
      await repo.updateWebhook(tx, who.accountId, id, { isActive: false })
      await repo.cancelPending(tx, id)
    })
  }
  return { delivery }
}

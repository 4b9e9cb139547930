// The same lifecycle through Paddle Billing and Lemon Squeezy: payloads shaped as each documents
// them (Paddle's notification types from its SDK), signed as each signs them (Paddle's ts/h1 HMAC,
// verified by its SDK with its 5 s tolerance; Lemon Squeezy's X-Signature HMAC).
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { IAdjustmentNotificationResponse, ISubscriptionNotificationResponse, ITransactionNotificationResponse } from '@paddle/paddle-node-sdk'
import { useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { connectorSetup, DAY, deliver, lemonHeaders, paddleHeaders } from './helpers'

setDefaultTimeout(60_000)

const h = useHarness({ socket: false })
type Setup = Awaited<ReturnType<typeof connectorSetup>>

const getKey = async (s: Setup, id: string) => (await h.call('GET', `/v1/keys/${id}`, { token: s.token })).body
const keyIds = async (s: Setup) =>
  (await h.node.deps.sql<{ id: string }[]>`select id from license_keys where account_id = ${s.id} order by created_at`).map((r) => r.id)
const iso = (ms: number) => new Date(ms).toISOString()

async function paddle(s: Setup, event_type: string, data: object, event_id = `evt_${Math.random().toString(36).slice(2, 14)}`) {
  const payload = JSON.stringify({ event_id, event_type, occurred_at: new Date().toISOString(), notification_id: 'ntf_1', data })
  const res = await deliver(h, s.connector.endpoint_path, payload, paddleHeaders(payload))
  if (res.status !== 200) throw new Error(`${event_type} → ${res.status} ${JSON.stringify(res.body)}`)
  return res.body as { outcome: string; detail: string }
}

const paddleSub = (id: string, status: string, endsAt: number, extra: Partial<ISubscriptionNotificationResponse> = {}) =>
  ({
    id,
    status,
    customer_id: 'ctm_1',
    address_id: 'add_1',
    currency_code: 'USD',
    created_at: iso(Date.now()),
    updated_at: iso(Date.now()),
    collection_mode: 'automatic',
    current_billing_period: { starts_at: iso(Date.now()), ends_at: iso(endsAt) },
    billing_cycle: { interval: 'month', frequency: 1 },
    items: [],
    ...extra,
  }) as unknown as ISubscriptionNotificationResponse

function paddleTxn(id: string, price: string, quantity: number, sub: string | null, endsAt: number | null): ITransactionNotificationResponse {
  return {
    id,
    status: 'completed',
    customer_id: 'ctm_1',
    custom_data: { email: 'paddle-buyer@example.com' },
    currency_code: 'USD',
    origin: 'web',
    subscription_id: sub,
    collection_mode: 'automatic',
    billing_period: endsAt ? { starts_at: iso(Date.now()), ends_at: iso(endsAt) } : null,
    items: [{ price: { id: price }, quantity }],
    payments: [],
    created_at: iso(Date.now()),
    updated_at: iso(Date.now()),
  } as unknown as ITransactionNotificationResponse
}

const adjustment = (transaction_id: string, action: string, type = 'full', status = 'approved') =>
  ({ id: `adj_${action}`, action, type, transaction_id, customer_id: 'ctm_1', reason: 'x', status, items: [] }) as unknown as IAdjustmentNotificationResponse

describe('Paddle', () => {
  test('purchase (quantity × limit), subscription issue/renew/pause/resume/cancel, chargeback, full refund; stale signatures refused', async () => {
    const s = await connectorSetup(h, 'paddle', ['pri_once', 'pri_monthly'])
    expect((await paddle(s, 'transaction.completed', paddleTxn('txn_1', 'pri_once', 2, null, null))).outcome).toBe('processed')
    const [once] = await keyIds(s)
    expect(await getKey(s, once!)).toMatchObject({ activation_limit: 4, expires_at: null, external_id: 'paddle:txn:txn_1', metadata: { provider: 'paddle', transaction: 'txn_1', customer_email: 'paddle-buyer@example.com' } })

    const end1 = Date.now() + 30 * DAY
    expect((await paddle(s, 'transaction.completed', paddleTxn('txn_2', 'pri_monthly', 1, 'sub_1', end1))).outcome).toBe('processed')
    const sub = (await keyIds(s))[1]!
    expect(await getKey(s, sub)).toMatchObject({ expires_at: iso(end1), external_id: 'paddle:sub:sub_1' })
    expect((await paddle(s, 'subscription.past_due', paddleSub('sub_1', 'past_due', end1))).outcome).toBe('ignored')
    const end2 = Date.now() + 60 * DAY
    await paddle(s, 'transaction.completed', paddleTxn('txn_3', 'pri_monthly', 1, 'sub_1', end2))
    expect((await getKey(s, sub)).expires_at).toBe(iso(end2))
    await paddle(s, 'subscription.paused', paddleSub('sub_1', 'paused', end2))
    expect(await getKey(s, sub)).toMatchObject({ status: 'suspended', suspend_reason: 'subscription_paused' })
    await paddle(s, 'subscription.resumed', paddleSub('sub_1', 'active', end2))
    expect((await getKey(s, sub)).status).toBe('active')
    const cancelAt = Date.now() + 20 * DAY
    await paddle(s, 'subscription.updated', paddleSub('sub_1', 'active', end2, { scheduled_change: { action: 'cancel', effective_at: iso(cancelAt), resume_at: null } }))
    expect((await getKey(s, sub)).expires_at).toBe(iso(cancelAt))

    await paddle(s, 'adjustment.created', adjustment('txn_1', 'chargeback'))
    expect(await getKey(s, once!)).toMatchObject({ status: 'suspended', suspend_reason: 'disputed' })
    expect((await paddle(s, 'adjustment.created', adjustment('txn_2', 'refund', 'full', 'pending_approval'))).outcome).toBe('ignored')
    expect((await paddle(s, 'adjustment.updated', adjustment('txn_2', 'refund', 'partial'))).outcome).toBe('ignored')
    await paddle(s, 'adjustment.updated', adjustment('txn_2', 'refund'))
    expect(await getKey(s, sub)).toMatchObject({ status: 'revoked', revoke_reason: 'refunded' })
    expect(await keyIds(s)).toHaveLength(2)

    const payload = JSON.stringify({ event_id: 'evt_stale', event_type: 'transaction.completed', data: paddleTxn('txn_9', 'pri_once', 1, null, null) })
    const stale = await deliver(h, s.connector.endpoint_path, payload, paddleHeaders(payload, { timestamp: Math.floor(Date.now() / 1000) - 60 }))
    expect(expectProblem(stale, 400, 'invalid_request').errors[0].field).toBe('signature')
    expect(await keyIds(s)).toHaveLength(2)
  })
})

/**
 * A fresh `updated_at` for every call: it is part of the inbox key, so two changes of one object within
 * the same millisecond (this machine is that fast) would read as a redelivery of the first.
 */
let lastStamp = 0
const nextStamp = () => new Date((lastStamp = Math.max(Date.now(), lastStamp + 1))).toISOString()

async function lemon(s: Setup, event_name: string, type: string, id: string, attributes: Record<string, unknown>) {
  const payload = JSON.stringify({ meta: { event_name, custom_data: null }, data: { type, id, attributes: { updated_at: nextStamp(), ...attributes } } })
  const res = await deliver(h, s.connector.endpoint_path, payload, lemonHeaders(payload, event_name))
  if (res.status !== 200) throw new Error(`${event_name} → ${res.status} ${JSON.stringify(res.body)}`)
  return res.body as { outcome: string; detail: string }
}

const order = (variant: number, quantity: number, status = 'paid') => ({
  store_id: 1,
  customer_id: 7,
  identifier: 'a1b2c3',
  user_email: 'ls-buyer@example.com',
  status,
  refunded: status === 'refunded',
  first_order_item: { order_id: 1, variant_id: variant, quantity },
})
const lsSub = (status: string, renewsAt: number, extra: Record<string, unknown> = {}) => ({
  order_id: 300,
  customer_id: 7,
  variant_id: 22,
  user_email: 'ls-sub@example.com',
  status,
  renews_at: iso(renewsAt),
  ends_at: null,
  trial_ends_at: null,
  ...extra,
})

describe('Lemon Squeezy', () => {
  test('order → key; the subscription order and subscription_created give one key; renew, pause, resume, cancel, refund; a bad X-Signature is refused', async () => {
    const s = await connectorSetup(h, 'lemonsqueezy', ['11', '22'])
    expect((await lemon(s, 'order_created', 'orders', '100', order(11, 3))).outcome).toBe('processed')
    const [once] = await keyIds(s)
    expect(await getKey(s, once!)).toMatchObject({ activation_limit: 6, external_id: 'lemonsqueezy:order:100', metadata: { provider: 'lemonsqueezy', order: '100', customer_email: 'ls-buyer@example.com' } })

    // a subscription's first order and its subscription_created: one key, expiring at renews_at
    const renews1 = Date.now() + 30 * DAY
    await lemon(s, 'order_created', 'orders', '300', order(22, 1))
    await lemon(s, 'subscription_created', 'subscriptions', '500', lsSub('active', renews1))
    const ids = await keyIds(s)
    expect(ids).toHaveLength(2)
    const sub = ids[1]!
    expect((await getKey(s, sub)).expires_at).toBe(iso(renews1))
    const renews2 = Date.now() + 60 * DAY
    await lemon(s, 'subscription_updated', 'subscriptions', '500', lsSub('active', renews2))
    expect((await getKey(s, sub)).expires_at).toBe(iso(renews2))
    expect((await lemon(s, 'subscription_updated', 'subscriptions', '500', lsSub('past_due', renews2))).outcome).toBe('ignored')
    await lemon(s, 'subscription_paused', 'subscriptions', '500', lsSub('paused', renews2))
    expect((await getKey(s, sub)).suspend_reason).toBe('subscription_paused')
    await lemon(s, 'subscription_resumed', 'subscriptions', '500', lsSub('active', renews2))
    expect((await getKey(s, sub)).status).toBe('active')
    const ends = Date.now() + 10 * DAY
    await lemon(s, 'subscription_cancelled', 'subscriptions', '500', lsSub('cancelled', renews2, { ends_at: iso(ends) }))
    expect((await getKey(s, sub)).expires_at).toBe(iso(ends))

    expect((await lemon(s, 'order_refunded', 'orders', '100', order(11, 3, 'partial_refund'))).outcome).toBe('ignored')
    await lemon(s, 'order_refunded', 'orders', '100', order(11, 3, 'refunded'))
    expect(await getKey(s, once!)).toMatchObject({ status: 'revoked', revoke_reason: 'refunded' })

    const payload = JSON.stringify({ meta: { event_name: 'order_created' }, data: { type: 'orders', id: '999', attributes: order(11, 1) } })
    const bad = await deliver(h, s.connector.endpoint_path, payload, lemonHeaders(payload, 'order_created', { secret: 'wrong' }))
    expect(expectProblem(bad, 400, 'invalid_request').errors[0].field).toBe('signature')
    // a replay of an accepted event changes nothing
    const replay = JSON.stringify({ meta: { event_name: 'order_created' }, data: { type: 'orders', id: '999', attributes: { ...order(11, 1), updated_at: '2026-01-01T00:00:00Z' } } })
    expect((await deliver(h, s.connector.endpoint_path, replay, lemonHeaders(replay, 'order_created'))).body.outcome).toBe('processed')
    expect((await deliver(h, s.connector.endpoint_path, replay, lemonHeaders(replay, 'order_created'))).body.outcome).toBe('duplicate')
    expect(await keyIds(s)).toHaveLength(3)
  })
})

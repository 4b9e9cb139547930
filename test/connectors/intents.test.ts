// Each provider's reader on its own (src/modules/connectors/providers/*.ts): one payload, read alone,
// is one Intent (src/modules/connectors/intents.ts), the lifecycle table of docs/payments.md. No
// signature, no database: the HTTP tests (stripe.test.ts, providers.test.ts) carry the rest.
import { describe, expect, test } from 'bun:test'
import type Stripe from 'stripe'
import { fromIso, fromUnix, Malformed, optStr, quantity, str, type Intent } from '../../src/modules/connectors/intents'
import { readLemonSqueezy } from '../../src/modules/connectors/providers/lemonsqueezy'
import { readPaddle } from '../../src/modules/connectors/providers/paddle'
import { readStripe } from '../../src/modules/connectors/providers/stripe'

const T = 1_900_000_000 // unix seconds
const at = (s: number) => new Date(s * 1000)

describe('the shared readers', () => {
  test('times, strings and quantities', () => {
    expect(fromUnix(T)).toEqual(at(T))
    expect(fromUnix('1900000000')).toBeNull()
    expect(fromIso('2030-03-17T17:46:40Z')).toEqual(new Date('2030-03-17T17:46:40Z'))
    expect(fromIso('not a date')).toBeNull()
    expect(str(42, 'n')).toBe('42')
    expect(() => str('', 'data.id')).toThrow(Malformed)
    expect(() => str(undefined, 'data.id')).toThrow('data.id is missing')
    expect(optStr('')).toBeNull()
    expect(optStr(7)).toBe('7')
    expect([quantity(3), quantity(0), quantity(1.5), quantity('2')]).toEqual([3, 1, 1, 1])
  })
})

describe('Stripe', () => {
  const event = (type: string, object: Record<string, unknown>) => ({ id: 'evt_1', type, data: { object } }) as unknown as Stripe.Event
  const intent = (type: string, object: Record<string, unknown>) => {
    const read = readStripe(event(type, object))
    expect(read).toMatchObject({ id: 'evt_1', type })
    return read.intent
  }
  const invoice = (extra: Record<string, unknown> = {}) => ({
    id: 'in_1',
    customer: 'cus_1',
    customer_email: 'a@example.com',
    payment_intent: 'pi_1',
    charge: 'ch_1',
    lines: { data: [{ pricing: { price_details: { price: 'price_pro' } }, quantity: 2, period: { end: T } }, { price: { id: 'price_old' }, period: { end: T + 10 } }] },
    ...extra,
  })

  test('a paid one-time checkout: a purchase of its lines, under the session, its payment and invoice', () => {
    expect(intent('checkout.session.completed', {
      id: 'cs_1', mode: 'payment', payment_status: 'paid', payment_intent: 'pi_1', customer: { id: 'cus_1' },
      customer_details: { email: 'a@example.com' }, metadata: { keyward_price: 'price_a, price_b', keyward_quantity: '2' },
    })).toEqual({
      kind: 'purchase',
      refs: ['cs:cs_1', 'pi:pi_1'],
      lines: [{ price: 'price_a', quantity: 2 }, { price: 'price_b', quantity: 2 }],
      email: 'a@example.com',
      name: null,
      ids: { checkout_session: 'cs_1', payment_intent: 'pi_1', customer: 'cus_1' },
    })
  })

  test('a checkout: expanded line items win over metadata; unpaid or subscription mode is nothing', () => {
    const read = intent('checkout.session.async_payment_succeeded', {
      id: 'cs_2', payment_status: 'paid', customer_email: 'b@example.com', line_items: { data: [{ price: { id: 'price_x' }, quantity: 3 }] }, metadata: { keyward_price: 'ignored' },
    })
    expect(read).toMatchObject({ kind: 'purchase', lines: [{ price: 'price_x', quantity: 3 }], email: 'b@example.com' })
    expect(intent('checkout.session.completed', { id: 'cs_3', payment_status: 'unpaid' }).kind).toBe('none')
    expect(intent('checkout.session.completed', { id: 'cs_4', mode: 'subscription', payment_status: 'paid' }).kind).toBe('none')
  })

  test("an invoice paid: a subscription's (current shape or before 2025) or a one-time purchase; the latest line period ends it", () => {
    const expected: Intent = {
      kind: 'subscription',
      refs: ['sub:sub_1', 'in:in_1', 'pi:pi_1', 'ch:ch_1'],
      lines: [{ price: 'price_pro', quantity: 2 }, { price: 'price_old', quantity: 1 }],
      email: 'a@example.com',
      name: null,
      ids: { invoice: 'in_1', subscription: 'sub_1', customer: 'cus_1' },
      periodEnd: at(T + 10),
      create: true,
    }
    expect(intent('invoice.paid', invoice({ parent: { subscription_details: { subscription: 'sub_1' } } }))).toEqual(expected)
    expect(intent('invoice.payment_succeeded', invoice({ subscription: 'sub_1' }))).toEqual(expected)
    expect(intent('invoice.paid', invoice())).toEqual({
      kind: 'purchase', refs: ['in:in_1', 'pi:pi_1', 'ch:ch_1'], lines: [{ price: 'price_pro', quantity: 2 }, { price: 'price_old', quantity: 1 }], email: 'a@example.com', name: null, ids: { invoice: 'in_1', customer: 'cus_1' },
    })
    expect(() => intent('invoice.paid', { id: 'in_2' })).toThrow(Malformed)
  })

  test('an invoice payment links its payment and charge to the invoice', () => {
    expect(intent('invoice_payment.paid', { invoice: 'in_1', payment: { payment_intent: 'pi_9', charge: 'ch_9' } })).toEqual({
      kind: 'link', refs: ['in:in_1'], more: ['pi:pi_9', 'ch:ch_9'],
    })
  })

  test('subscription paused, resumed, updated (period moved, cancelling, other status), deleted', () => {
    expect(intent('customer.subscription.paused', { id: 'sub_1' })).toEqual({ kind: 'suspend', refs: ['sub:sub_1'], reason: 'subscription_paused' })
    expect(intent('customer.subscription.resumed', { id: 'sub_1' })).toEqual({ kind: 'reinstate', refs: ['sub:sub_1'], reason: 'subscription_paused' })
    expect(intent('customer.subscription.updated', { id: 'sub_1', status: 'active', items: { data: [{ current_period_end: T }, { current_period_end: T + 5 }] } })).toEqual({
      kind: 'subscription', refs: ['sub:sub_1'], lines: [], email: null, ids: {}, periodEnd: at(T + 5), create: false,
    })
    expect(intent('customer.subscription.updated', { id: 'sub_1', status: 'trialing', current_period_end: T })).toMatchObject({ kind: 'subscription', periodEnd: at(T) })
    expect(intent('customer.subscription.updated', { id: 'sub_1', status: 'active', cancel_at_period_end: true, current_period_end: T })).toEqual({ kind: 'end', refs: ['sub:sub_1'], at: at(T) })
    expect(intent('customer.subscription.updated', { id: 'sub_1', status: 'active', cancel_at: T + 99, current_period_end: T })).toEqual({ kind: 'end', refs: ['sub:sub_1'], at: at(T + 99) })
    expect(() => intent('customer.subscription.updated', { id: 'sub_1', cancel_at_period_end: true })).toThrow(Malformed)
    expect(intent('customer.subscription.updated', { id: 'sub_1', status: 'past_due' }).kind).toBe('none')
    expect(intent('customer.subscription.deleted', { id: 'sub_1', ended_at: T })).toEqual({ kind: 'end', refs: ['sub:sub_1'], at: at(T) })
  })

  test('a full refund revokes, a partial one is nothing; a dispute suspends, a won dispute reinstates, a lost one is nothing', () => {
    expect(intent('charge.refunded', { id: 'ch_1', payment_intent: 'pi_1', invoice: 'in_1', refunded: true })).toEqual({
      kind: 'revoke', refs: ['pi:pi_1', 'ch:ch_1', 'in:in_1'], reason: 'refunded',
    })
    expect(intent('charge.refunded', { id: 'ch_1', refunded: false }).kind).toBe('none')
    expect(intent('charge.dispute.created', { id: 'dp_1', payment_intent: 'pi_1', charge: 'ch_1' })).toEqual({ kind: 'suspend', refs: ['pi:pi_1', 'ch:ch_1'], reason: 'disputed' })
    expect(intent('charge.dispute.closed', { id: 'dp_1', charge: 'ch_1', status: 'won' })).toEqual({ kind: 'reinstate', refs: ['ch:ch_1'], reason: 'disputed' })
    expect(intent('charge.dispute.closed', { id: 'dp_1', charge: 'ch_1', status: 'lost' }).kind).toBe('none')
  })

  test('a failed payment and an event Keyward does not act on are nothing, with the reason', () => {
    expect(intent('invoice.payment_failed', { id: 'in_1' })).toEqual({ kind: 'none', detail: expect.stringContaining('payment failed') })
    expect(intent('customer.created', { id: 'cus_1' })).toEqual({ kind: 'none', detail: 'Keyward does not act on customer.created' })
    expect(() => readStripe({ id: 'evt_1', type: 'charge.refunded', data: {} } as unknown as Stripe.Event)).toThrow('data.object is missing')
  })
})

describe('Paddle', () => {
  const read = (event_type: string, data: Record<string, unknown>) => {
    const r = readPaddle({ event_id: 'evt_1', event_type, data })
    expect(r).toMatchObject({ id: 'evt_1', type: event_type })
    return r.intent
  }
  const items = [{ price: { id: 'pri_1' }, quantity: 2 }, { price_id: 'pri_2' }, { quantity: 1 }]

  test('a completed transaction: a purchase, or a subscription created under the subscription and the transaction', () => {
    expect(read('transaction.completed', { id: 'txn_1', customer_id: 'ctm_1', invoice_number: '2030-1', custom_data: { email: 'a@example.com' }, items })).toEqual({
      kind: 'purchase',
      refs: ['txn:txn_1'],
      lines: [{ price: 'pri_1', quantity: 2 }, { price: 'pri_2', quantity: 1 }],
      email: 'a@example.com',
      name: null,
      ids: { transaction: 'txn_1', customer: 'ctm_1', invoice_number: '2030-1' },
    })
    expect(read('transaction.completed', { id: 'txn_2', subscription_id: 'sub_1', items, billing_period: { ends_at: '2030-01-01T00:00:00Z' } })).toEqual({
      kind: 'subscription',
      refs: ['sub:sub_1', 'txn:txn_2'],
      lines: [{ price: 'pri_1', quantity: 2 }, { price: 'pri_2', quantity: 1 }],
      email: null,
      name: null,
      ids: { transaction: 'txn_2', subscription: 'sub_1' },
      periodEnd: new Date('2030-01-01T00:00:00Z'),
      create: true,
    })
    expect(() => read('transaction.completed', { id: 'txn_3' })).toThrow('data.items is missing')
  })

  test('subscription created/updated: period moved, cancel scheduled, paused, other status', () => {
    expect(read('subscription.updated', { id: 'sub_1', status: 'active', current_billing_period: { ends_at: '2030-02-01T00:00:00Z' } })).toEqual({
      kind: 'subscription', refs: ['sub:sub_1'], lines: [], email: null, ids: {}, periodEnd: new Date('2030-02-01T00:00:00Z'), create: false,
    })
    expect(read('subscription.resumed', { id: 'sub_1', status: 'trialing' })).toMatchObject({ kind: 'subscription', periodEnd: null })
    expect(read('subscription.updated', { id: 'sub_1', status: 'active', scheduled_change: { action: 'cancel', effective_at: '2030-03-01T00:00:00Z' } })).toEqual({
      kind: 'end', refs: ['sub:sub_1'], at: new Date('2030-03-01T00:00:00Z'),
    })
    expect(() => read('subscription.updated', { id: 'sub_1', scheduled_change: { action: 'cancel' } })).toThrow(Malformed)
    expect(read('subscription.activated', { id: 'sub_1', status: 'paused' })).toEqual({ kind: 'suspend', refs: ['sub:sub_1'], reason: 'subscription_paused' })
    expect(read('subscription.created', { id: 'sub_1', status: 'past_due' }).kind).toBe('none')
  })

  test('paused, canceled, past due', () => {
    expect(read('subscription.paused', { id: 'sub_1' })).toEqual({ kind: 'suspend', refs: ['sub:sub_1'], reason: 'subscription_paused' })
    expect(read('subscription.canceled', { id: 'sub_1', canceled_at: '2030-04-01T00:00:00Z' })).toEqual({ kind: 'end', refs: ['sub:sub_1'], at: new Date('2030-04-01T00:00:00Z') })
    expect(read('subscription.past_due', { id: 'sub_1' }).kind).toBe('none')
    expect(read('transaction.payment_failed', { id: 'txn_1' }).kind).toBe('none')
  })

  test('adjustments: chargeback suspends, its reversal reinstates, an approved full refund revokes; the rest is nothing', () => {
    const adj = (extra: Record<string, unknown>) => read('adjustment.updated', { id: 'adj_1', transaction_id: 'txn_1', ...extra })
    expect(adj({ action: 'chargeback' })).toEqual({ kind: 'suspend', refs: ['txn:txn_1'], reason: 'disputed' })
    expect(adj({ action: 'chargeback_reverse' })).toEqual({ kind: 'reinstate', refs: ['txn:txn_1'], reason: 'disputed' })
    expect(adj({ action: 'refund', status: 'approved', type: 'full' })).toEqual({ kind: 'revoke', refs: ['txn:txn_1'], reason: 'refunded' })
    expect(adj({ action: 'refund', status: 'pending_approval', type: 'full' }).kind).toBe('none')
    expect(adj({ action: 'refund', status: 'approved', type: 'partial' }).kind).toBe('none')
    expect(adj({ action: 'credit' }).kind).toBe('none')
    expect(() => read('adjustment.created', { id: 'adj_1', action: 'chargeback' })).toThrow('data.transaction_id is missing')
  })

  test('an event Keyward does not act on is nothing; a body without an event id is malformed', () => {
    expect(read('customer.created', { id: 'ctm_1' })).toEqual({ kind: 'none', detail: 'Keyward does not act on customer.created' })
    expect(() => readPaddle({ event_type: 'subscription.paused', data: { id: 'sub_1' } })).toThrow('event_id is missing')
  })
})

describe('Lemon Squeezy', () => {
  const headers = new Headers()
  const read = (event_name: string, id: string, attributes: Record<string, unknown>) => {
    const r = readLemonSqueezy({ meta: { event_name }, data: { id, attributes: { updated_at: '2030-01-01T00:00:00Z', ...attributes } } }, headers)
    expect(r).toMatchObject({ id: `${event_name}:${id}:2030-01-01T00:00:00Z`, type: event_name })
    return r.intent
  }

  test('a paid order: a purchase of its first item; an unpaid one is nothing', () => {
    expect(read('order_created', '11', { status: 'paid', identifier: 'ord-uuid', customer_id: 7, user_email: 'a@example.com', first_order_item: { variant_id: 99, quantity: 2 } })).toEqual({
      kind: 'purchase',
      refs: ['order:11'],
      lines: [{ price: '99', quantity: 2 }],
      email: 'a@example.com',
      name: null,
      ids: { order: '11', order_identifier: 'ord-uuid', customer: '7' },
    })
    expect(read('order_created', '12', { status: 'pending' }).kind).toBe('none')
    expect(() => read('order_created', '13', { status: 'paid' })).toThrow('data.attributes.first_order_item is missing')
  })

  test('subscriptions: created active or on trial, updated, paused, cancelled, expired, other status', () => {
    expect(read('subscription_created', '21', { status: 'active', order_id: 11, customer_id: 7, variant_id: 99, user_email: 'a@example.com', renews_at: '2030-02-01T00:00:00Z' })).toEqual({
      kind: 'subscription',
      refs: ['sub:21', 'order:11'],
      lines: [{ price: '99', quantity: 1 }],
      email: 'a@example.com',
      name: null,
      ids: { subscription: '21', order: '11', customer: '7' },
      periodEnd: new Date('2030-02-01T00:00:00Z'),
      create: true,
    })
    expect(read('subscription_updated', '21', { status: 'on_trial', variant_id: 99, trial_ends_at: '2030-01-15T00:00:00Z', renews_at: '2030-02-01T00:00:00Z' })).toMatchObject({
      kind: 'subscription', refs: ['sub:21'], periodEnd: new Date('2030-01-15T00:00:00Z'), create: false,
    })
    expect(read('subscription_paused', '21', { status: 'active' })).toEqual({ kind: 'suspend', refs: ['sub:21'], reason: 'subscription_paused' })
    expect(read('subscription_updated', '21', { status: 'paused' })).toEqual({ kind: 'suspend', refs: ['sub:21'], reason: 'subscription_paused' })
    expect(read('subscription_cancelled', '21', { status: 'cancelled', ends_at: '2030-03-01T00:00:00Z' })).toEqual({ kind: 'end', refs: ['sub:21'], at: new Date('2030-03-01T00:00:00Z') })
    expect(read('subscription_expired', '21', { status: 'expired', ends_at: '2030-03-02T00:00:00Z' })).toMatchObject({ kind: 'end', at: new Date('2030-03-02T00:00:00Z') })
    expect(read('subscription_updated', '21', { status: 'past_due' }).kind).toBe('none')
  })

  test('refunds: a full one revokes the order or the subscription, a partial one is nothing; payments are nothing', () => {
    expect(read('order_refunded', '11', { status: 'refunded' })).toEqual({ kind: 'revoke', refs: ['order:11'], reason: 'refunded' })
    expect(read('order_refunded', '11', { status: 'partial_refund' }).kind).toBe('none')
    expect(read('subscription_payment_refunded', '31', { status: 'refunded', subscription_id: 21 })).toEqual({ kind: 'revoke', refs: ['sub:21'], reason: 'refunded' })
    expect(read('subscription_payment_refunded', '31', { status: 'partial_refund', subscription_id: 21 }).kind).toBe('none')
    expect(read('subscription_payment_success', '31', {}).kind).toBe('none')
    expect(read('subscription_payment_failed', '31', {}).kind).toBe('none')
    expect(read('license_key_created', '41', {})).toEqual({ kind: 'none', detail: 'Keyward does not act on license_key_created' })
  })

  test('the event name comes from meta, else the X-Event-Name header; without either the body is malformed', () => {
    const body = { meta: {}, data: { id: '11', attributes: { status: 'refunded' } } }
    expect(readLemonSqueezy(body, new Headers({ 'x-event-name': 'order_refunded' }))).toEqual({
      id: 'order_refunded:11:', type: 'order_refunded', intent: { kind: 'revoke', refs: ['order:11'], reason: 'refunded' },
    })
    expect(() => readLemonSqueezy(body, new Headers())).toThrow('meta.event_name is missing')
  })
})

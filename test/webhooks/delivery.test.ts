// Delivery end to end: a local receiver verifies every request with the `standardwebhooks` package.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Ajv2020 from 'ajv/dist/2020'
import addFormats from 'ajv-formats'
import { emit, SYSTEM } from '../../src/modules/events/outbox'
import { ADMIN_TOKEN, newKey, newProduct, useHarness } from '../support/harness'
import { ALL_EVENTS, fingerprint, LOCAL_DELIVERY, newWebhook, without } from './helpers'
import { eventually, startReceiver, type Receiver } from './receiver'

const h = useHarness({ env: { ...LOCAL_DELIVERY, SWEEP_INTERVAL_MS: '200' } })
let rx: Receiver
beforeAll(() => {
  rx = startReceiver()
})
afterAll(() => rx.stop()) // after the node has stopped (hooks run in the order they were registered)

let paths = 0
const path = () => `/hook/${++paths}`

async function webhookDetail(token: string, id: string) {
  const res = await h.call('GET', `/v1/webhooks/${id}`, { token })
  expect(res.status).toBe(200)
  return res.body
}

/** The delivery queue rows of a webhook (status per event), straight from Postgres. */
const queueOf = (webhookId: string) =>
  h.node.deps.sql<{ event_id: string; status: string; attempts: number }[]>`select event_id, status, attempts
    from webhook_deliveries where webhook_id = ${webhookId} order by id`

test('every event type arrives signed, with its documented data', async () => {
  const { id: accountId, token } = await h.account('growth')
  const p = path()
  const wh = await newWebhook(h.call, token, rx.url(p), ALL_EVENTS)
  rx.expect(p, wh.secret)

  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { activation_limit: 2 })
  const device = fingerprint()
  const valid = await h.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })
  expect(valid.body.valid).toBe(true)
  const deactivated = await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: device } })
  expect(deactivated.body.deactivated).toBe(true)
  const extended = await h.call('POST', `/v1/keys/${key.id}/extend`, { token, body: { expires_at: '2099-01-01T00:00:00.000Z' } })
  expect(extended.status).toBe(200)
  const revoked = await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: { reason: 'refund' } })
  expect(revoked.status).toBe(200)
  const expiring = await newKey(h.call, token, product.id, { expires_at: new Date(Date.now() + 800).toISOString() })
  const plan = await h.call('PATCH', `/admin/accounts/${accountId}`, { token: ADMIN_TOKEN, body: { plan: 'enterprise' } })
  expect(plan.status).toBe(200)

  await rx.waitFor(() => rx.on(p).length >= 9, 15_000, 'nine events')
  const got = rx.on(p)
  for (const r of got) {
    expect(r.error).toBeNull() // verified by standardwebhooks
    expect(r.headers['webhook-id']).toBe(r.payload!.id)
    expect(r.headers['webhook-id']).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)
    expect(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60)
    expect(r.headers['content-type']).toBe('application/json')
    expect(r.headers['user-agent']).toBe('Keyward-Webhooks/1')
    expect(Object.keys(JSON.parse(r.body)).sort()).toEqual(['actor', 'data', 'id', 'timestamp', 'type'])
    expect(r.payload!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  }
  const byType = (type: string) => got.filter((r) => r.payload!.type === type).map((r) => r.payload!.data)
  expect(got.map((r) => r.payload!.type).sort()).toEqual(
    ['account.plan_changed', 'activation.created', 'activation.deactivated', 'key.created', 'key.created', 'key.expired',
      'key.extended', 'key.revoked', 'product.created'],
  )
  expect(byType('product.created')).toEqual([product])
  expect(byType('key.created')).toContainEqual(without(key, 'key_value'))
  expect(byType('key.created')).toContainEqual(without(expiring, 'key_value'))
  expect(byType('key.extended')).toEqual([extended.body])
  expect(byType('key.revoked')).toEqual([revoked.body])
  expect(byType('key.expired')).toEqual([{ ...without(expiring, 'key_value'), status: 'expired' }])
  expect(byType('account.plan_changed')).toEqual([{ account_id: accountId, previous_plan: 'growth', plan: 'enterprise' }])

  const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
  const [activation] = detail.body.activations
  const [created] = byType('activation.created')
  expect(created).toEqual({ activation: { ...activation, status: 'active', deactivated_at: null, deactivation_reason: null }, key_id: key.id, product_id: product.id })
  expect(byType('activation.deactivated')).toEqual([{ activation, key_id: key.id, product_id: product.id }])
  expect(activation.deactivation_reason).toBe('user')

  // one attempt each, logged as successes
  const logged = await webhookDetail(token, wh.id)
  expect(logged.deliveries).toHaveLength(9)
  for (const d of logged.deliveries) {
    expect(d).toMatchObject({ attempt: 1, status_code: 200, success: true, error: null })
    expect(d.id).toMatch(/^whd_/)
    expect(d.duration_ms).toBeGreaterThanOrEqual(0)
  }
  expect(new Set(logged.deliveries.map((d: any) => d.event_id))).toEqual(new Set(got.map((r) => r.payload!.id)))
})

test('500, 500, then 200: three attempts logged, success last, same webhook-id', async () => {
  const { token } = await h.account('growth')
  const p = path()
  const wh = await newWebhook(h.call, token, rx.url(p), ['product.created'])
  rx.expect(p, wh.secret, (n) => (n <= 2 ? 500 : 200))
  await newProduct(h.call, token)

  await rx.waitFor(() => rx.on(p).length >= 3, 10_000, 'three attempts')
  const got = rx.on(p)
  expect(got.every((r) => r.error === null)).toBe(true)
  expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1)

  const detail = await eventually(async () => {
    const d = await webhookDetail(token, wh.id)
    return d.deliveries.length === 3 ? d : null
  }, 5_000, 'three logged attempts')
  expect(detail.deliveries.map((d: any) => [d.attempt, d.status_code, d.success])).toEqual([
    [3, 200, true],
    [2, 500, false],
    [1, 500, false],
  ])
  expect(detail.deliveries[1].error).toMatch(/^HTTP 500/)
  expect(new Set(detail.deliveries.map((d: any) => d.event_id))).toEqual(new Set([got[0].headers['webhook-id']]))
  expect(await queueOf(wh.id)).toHaveLength(0) // a delivery that succeeded leaves its attempt log, not a row
})

test('after the last retry the delivery is failed and is not attempted again', async () => {
  const { token } = await h.account('growth')
  const p = path()
  const wh = await newWebhook(h.call, token, rx.url(p), ['product.created'])
  rx.expect(p, wh.secret, 503)
  await newProduct(h.call, token)

  // three retry delays configured: four attempts in all
  const [queued] = await eventually(async () => {
    const q = await queueOf(wh.id)
    return q[0]?.status === 'failed' ? q : null
  }, 10_000, 'a failed delivery')
  expect(queued.attempts).toBe(4)
  await Bun.sleep(400) // longer than any retry delay
  expect(rx.on(p)).toHaveLength(4)
  const detail = await webhookDetail(token, wh.id)
  expect(detail.deliveries.map((d: any) => d.attempt)).toEqual([4, 3, 2, 1])
  expect(detail.is_active).toBe(true)
})

test('410 Gone disables the webhook and cancels what was pending', async () => {
  const { token } = await h.account('growth')
  const p = path()
  const wh = await newWebhook(h.call, token, rx.url(p), ['product.created'])
  rx.expect(p, wh.secret, 410)
  await newProduct(h.call, token)

  const detail = await eventually(async () => {
    const d = await webhookDetail(token, wh.id)
    return d.is_active === false ? d : null
  }, 10_000, 'the webhook to be disabled')
  expect(detail.deliveries).toHaveLength(1)
  expect(detail.deliveries[0]).toMatchObject({ attempt: 1, status_code: 410, success: false })
  expect((await queueOf(wh.id)).map((q) => q.status)).toEqual(['failed'])

  // disabled: later events are not even queued
  await newProduct(h.call, token)
  expect(await queueOf(wh.id)).toHaveLength(1)
  expect(rx.on(p)).toHaveLength(1)
})

test('inactive webhooks and unsubscribed event types get nothing', async () => {
  const { token } = await h.account('growth')
  const [pa, pb, pc] = [path(), path(), path()]
  const onlyProducts = await newWebhook(h.call, token, rx.url(pa), ['product.created'])
  const inactive = await newWebhook(h.call, token, rx.url(pb), ALL_EVENTS)
  const everything = await newWebhook(h.call, token, rx.url(pc), ALL_EVENTS)
  rx.expect(pa, onlyProducts.secret)
  rx.expect(pb, inactive.secret)
  rx.expect(pc, everything.secret)
  const off = await h.call('PATCH', `/v1/webhooks/${inactive.id}`, { token, body: { is_active: false } })
  expect(off.body.is_active).toBe(false)

  const product = await newProduct(h.call, token)
  await newKey(h.call, token, product.id)
  await rx.waitFor(() => rx.on(pc).length >= 2 && rx.on(pa).length >= 1, 10_000)
  await eventually(async () => {
    const [{ n }] = await h.node.deps.sql`select count(*)::int as n from webhook_deliveries where status = 'pending'
      and webhook_id in (${onlyProducts.id}, ${everything.id})`
    return n === 0
  }, 5_000, 'the queue to drain')

  expect(rx.on(pa).map((r) => r.payload!.type)).toEqual(['product.created'])
  expect(rx.on(pb)).toHaveLength(0)
  expect(await queueOf(inactive.id)).toHaveLength(0)
  expect(rx.on(pc).map((r) => r.payload!.type).sort()).toEqual(['key.created', 'product.created'])

  // re-activated, it receives new events again
  await h.call('PATCH', `/v1/webhooks/${inactive.id}`, { token, body: { is_active: true } })
  await newProduct(h.call, token)
  await rx.waitFor(() => rx.on(pb).length === 1, 10_000)
  expect(rx.on(pb)[0].payload!.type).toBe('product.created')
})

test('POST /v1/webhooks/:id/test sends a signed sample key.created now and logs the attempt', async () => {
  const { token } = await h.account('growth')
  const p = path()
  const wh = await newWebhook(h.call, token, rx.url(p), ['product.created'])
  rx.expect(p, wh.secret, (n) => (n === 1 ? 200 : 500))

  const ok = await h.call('POST', `/v1/webhooks/${wh.id}/test`, { token })
  expect(ok.status).toBe(200)
  expect(ok.body.delivery).toMatchObject({ event_type: 'key.created', attempt: 1, status_code: 200, success: true, error: null })
  expect(ok.body.delivery.id).toMatch(/^whd_/)
  const [got] = rx.on(p)
  expect(got.error).toBeNull()
  expect(got.payload!.type).toBe('key.created')
  expect(got.payload!.id).toBe(ok.body.delivery.event_id)
  // The sample is a valid key.created body by the schema the server declares in its OpenAPI document.
  const doc = (await h.call('GET', '/docs/json')).body
  const schema = doc.webhooks['key.created'].post.requestBody.content['application/json'].schema
  const ajv = new Ajv2020({ strict: false, allErrors: true })
  addFormats(ajv)
  const check = ajv.compile(schema)
  expect(check(JSON.parse(got.body)) ? [] : check.errors).toEqual([])
  expect(Object.keys(got.payload!.data).sort()).toEqual(Object.keys(schema.properties.data.properties).sort())

  const failed = await h.call('POST', `/v1/webhooks/${wh.id}/test`, { token })
  expect(failed.status).toBe(200)
  expect(failed.body.delivery).toMatchObject({ status_code: 500, success: false })
  expect(failed.body.delivery.error).toMatch(/^HTTP 500/)

  const detail = await webhookDetail(token, wh.id)
  expect(detail.deliveries.map((d: any) => d.id)).toEqual([failed.body.delivery.id, ok.body.delivery.id])
  await Bun.sleep(300) // a test send is never retried
  expect(rx.on(p)).toHaveLength(2)
})

test('deleting a webhook drops its pending deliveries: nothing is signed with its secret afterwards', async () => {
  const { token } = await h.account('growth')
  const p = path()
  const wh = await newWebhook(h.call, token, rx.url(p), ['product.created'])
  rx.expect(p, wh.secret, 500)
  await newProduct(h.call, token)
  await rx.waitFor(() => rx.on(p).length >= 1, 5_000)

  const del = await h.call('DELETE', `/v1/webhooks/${wh.id}`, { token })
  expect(del.status).toBe(204)
  expect(await queueOf(wh.id)).toHaveLength(0)
  const seen = rx.on(p).length
  await Bun.sleep(400)
  expect(rx.on(p)).toHaveLength(seen)
  expect((await h.call('GET', `/v1/webhooks/${wh.id}`, { token })).status).toBe(404)
})

test('disabling and deleting webhooks in the middle of a burst: no errors, nothing left pending', async () => {
  const { id: accountId, token } = await h.account('growth')
  const [p1, p2, p3] = [path(), path(), path()]
  const disabled = await newWebhook(h.call, token, rx.url(p1), ['key.created'])
  const deleted = await newWebhook(h.call, token, rx.url(p2), ['key.created'])
  const kept = await newWebhook(h.call, token, rx.url(p3), ['key.created'])
  rx.expect(p1, disabled.secret, 500)
  rx.expect(p2, deleted.secret, 500)
  rx.expect(p3, kept.secret)

  const BURST = 200
  await h.node.deps.sql.begin(async (tx) => {
    for (let i = 0; i < BURST; i++) await emit(tx, accountId, 'key.created', { i }, SYSTEM)
  })
  await rx.waitFor(() => rx.on(p1).length > 0 && rx.on(p2).length > 0, 10_000)
  const [off, del] = await Promise.all([
    h.call('PATCH', `/v1/webhooks/${disabled.id}`, { token, body: { is_active: false } }),
    h.call('DELETE', `/v1/webhooks/${deleted.id}`, { token }),
  ])
  expect(off.status).toBe(200)
  expect(del.status).toBe(204)
  expect(await queueOf(deleted.id)).toHaveLength(0)
  expect((await queueOf(disabled.id)).filter((q) => q.status === 'pending')).toHaveLength(0)

  await rx.waitFor(() => rx.on(p3).length >= BURST, 20_000, 'the kept webhook\'s burst')
  expect(new Set(rx.on(p3).map((r) => r.payload!.id)).size).toBe(BURST)
  expect(rx.on(p3).every((r) => r.error === null)).toBe(true)
  const [seen1, seen2] = [rx.on(p1).length, rx.on(p2).length]
  await Bun.sleep(300) // retry delays are 100 ms: nothing more may come
  expect([rx.on(p1).length, rx.on(p2).length]).toEqual([seen1, seen2])
})

test('delivery outcomes are counted in /metrics', async () => {
  const res = await fetch(`${h.node.url}/metrics`)
  const text = await res.text()
  expect(text).toMatch(/keyward_webhook_deliveries_total\{outcome="success"\} [1-9]/)
  expect(text).toMatch(/keyward_webhook_deliveries_total\{outcome="retry"\} [1-9]/)
  expect(text).toMatch(/keyward_webhook_deliveries_total\{outcome="failed"\} [1-9]/)
  expect(text).toMatch(/keyward_webhook_deliveries_total\{outcome="disabled"\} [1-9]/)
})

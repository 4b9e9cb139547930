// The outbox's batch form: emitMany writes exactly what one emit per event would (ids, order, actor,
// resource ids, webhook deliveries for the subscribed webhooks only), and nothing when rolled back.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { emit, emitMany, SYSTEM, type PendingEvent } from '../../src/modules/events/outbox'
import { useHarness } from '../support/harness'
import { newWebhook } from '../webhooks/helpers'

setDefaultTimeout(60_000)
// a webhook that is never reached: deliveries stay pending for the test to count
const h = useHarness({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_DELAYS_MS: '3600000' } })

const rowsOf = (ids: string[]) =>
  h.node.deps.sql<{ id: string; type: string; data: any; actor_type: string; actor_id: string | null; resource_ids: string[] }[]>`
    select id, type, data, actor_type, actor_id, resource_ids from events where id = any (${ids}) order by seq`
const deliveriesOf = (ids: string[]) =>
  h.node.deps.sql<{ event_id: string; webhook_id: string }[]>`select event_id, webhook_id from webhook_deliveries where event_id = any (${ids})`

test('emitMany: the rows one emit each would write, in order, with the deliveries of subscribed webhooks', async () => {
  const { id: accountId, token } = await h.account()
  const other = await h.account()
  const hook = await newWebhook(h.call, token, 'http://127.0.0.1:9/never', ['activation.deactivated'])
  const batch: PendingEvent[] = [
    { accountId, type: 'activation.deactivated', data: { activation: { id: 'act_a' }, key_id: 'key_1', product_id: 'prd_1' }, actor: SYSTEM },
    { accountId, type: 'key.updated', data: { id: 'key_1' }, actor: { type: 'api_key', id: 'ak_x' } },
    { accountId: other.id, type: 'activation.deactivated', data: { activation: { id: 'act_b' }, key_id: 'key_2' }, actor: SYSTEM },
    { accountId, type: 'activation.deactivated', data: { activation: { id: 'act_c' }, key_id: 'key_1', note: 'ünïcode "quoted"' }, actor: SYSTEM },
  ]
  const ids = await h.node.deps.sql.begin((tx) => emitMany(tx, batch))
  expect(ids).toHaveLength(4)
  expect(new Set(ids).size).toBe(4)

  // the same event written by emit, for comparison
  const single = await h.node.deps.sql.begin((tx) => emit(tx, batch[0].accountId, batch[0].type, batch[0].data, batch[0].actor))
  const [one] = await rowsOf([single])

  const rows = await rowsOf(ids)
  expect(rows.map((r) => r.id)).toEqual(ids) // seq follows the input order
  expect(rows.map((r) => [r.type, r.data, r.actor_type, r.actor_id])).toEqual(batch.map((e) => [e.type, e.data, e.actor.type, e.actor.id]))
  expect(rows[0].resource_ids).toEqual(one.resource_ids)
  expect(rows.map((r) => r.resource_ids.sort())).toEqual([['act_a', 'key_1'], ['key_1'], ['act_b', 'key_2'], ['act_c', 'key_1']])

  // only this account's subscribed events fan out to its webhook
  const deliveries = await deliveriesOf(ids)
  expect(deliveries.map((d) => d.event_id).sort()).toEqual([ids[0], ids[3]].sort())
  expect(deliveries.every((d) => d.webhook_id === hook.id)).toBe(true)

  // the audit trail finds them like any event
  const listed = await h.call('GET', '/v1/events?resource_id=act_c', { token })
  expect(listed.body.data.map((e: { id: string }) => e.id)).toEqual([ids[3]])
})

test('emitMany: nothing for an empty batch, nothing left by a rolled-back transaction', async () => {
  const { id: accountId } = await h.account()
  expect(await h.node.deps.sql.begin((tx) => emitMany(tx, []))).toEqual([])
  let ids: string[] = []
  const failed = await h.node.deps.sql
    .begin(async (tx) => {
      ids = await emitMany(tx, [{ accountId, type: 'key.updated', data: { id: 'key_9' }, actor: SYSTEM }])
      throw new Error('roll back')
    })
    .catch((e: Error) => e.message)
  expect(failed).toBe('roll back')
  expect(ids).toHaveLength(1)
  expect(await rowsOf(ids)).toHaveLength(0)
})

// What the unauthenticated POST /hooks/:connector_id may cost (modules/connectors/hook-gate.ts): an
// unknown id and a bad signature get one answer (no id oracle); unknown ids are answered from memory
// (another node's new connector is seen at the next reload, at most RELOAD_MS later); bad signatures
// are counted and sampled, not each written; a connector id and a calling address each have a rate.
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { newId } from '../../src/infra/crypto'
import { RELOAD_MS } from '../../src/modules/connectors/hook-gate'
import { useHarness } from '../support/harness'
import { expectProblem, ghostId } from '../support/helpers'
import { connectorSetup, deliver, stripeEvent, stripeHeaders } from './helpers'

setDefaultTimeout(60_000)

const h = useHarness() // a real socket: the calling address is known

const purchase = () =>
  JSON.stringify(stripeEvent('checkout.session.completed', { id: `cs_${Math.random().toString(36).slice(2)}`, object: 'checkout.session', mode: 'payment', payment_status: 'paid' }))
const refusalsCounted = async (outcome: string) => {
  const text = (await h.call('GET', '/metrics')).body as string
  const line = text.split('\n').find((l) => l.startsWith(`keyward_hook_refusals_total{outcome="${outcome}"}`))
  return line === undefined ? 0 : Number(line.split(' ').pop())
}
const eventsOf = async (connectorId: string) =>
  (await h.node.deps.sql<{ outcome: string }[]>`select outcome from connector_events where connector_id = ${connectorId}`).map((r) => r.outcome)

describe('POST /hooks/:connector_id before Postgres', () => {
  test('an unknown connector id and a bad signature answer alike: status, headers and body but the request id', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    const payload = purchase()
    const shape = (res: { status: number; body: any; headers: Headers }) => ({
      status: res.status,
      type: res.headers.get('content-type'),
      body: { ...res.body, request_id: undefined },
    })
    const unknown = await deliver(h, `/hooks/${ghostId('con')}`, payload, stripeHeaders(payload))
    const malformedId = await deliver(h, '/hooks/not-an-id', payload, stripeHeaders(payload))
    const bad = await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload, { secret: 'whsec_wrong' }))
    const unsigned = await deliver(h, s.connector.endpoint_path, payload, { 'content-type': 'application/json' })
    expectProblem(bad, 400, 'invalid_request')
    for (const other of [unknown, malformedId, unsigned]) expect(shape(other)).toEqual(shape(bad))
  })

  test('bad signatures are counted, and written at most once a minute per connector', async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    const before = await refusalsCounted('bad_signature')
    for (let i = 0; i < 5; i++) {
      const payload = purchase()
      expectProblem(await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload, { secret: 'whsec_wrong' })), 400, 'invalid_request')
    }
    expect(await refusalsCounted('bad_signature')).toBe(before + 5)
    expect(await eventsOf(s.connector.id)).toEqual(['bad_signature'])
    // a good signature is still served, and its event written
    const payload = purchase()
    expect((await deliver(h, s.connector.endpoint_path, payload, stripeHeaders(payload))).status).toBe(200)
  })

  test("unknown ids are answered from memory: another node's new connector is known here within the reload interval", async () => {
    const s = await connectorSetup(h, 'stripe', ['price_a'])
    // a miss: this node reads the ids it knows now
    const payload = purchase()
    expectProblem(await deliver(h, `/hooks/${ghostId('con')}`, payload, stripeHeaders(payload)), 400, 'invalid_request')
    // a connector created behind this node's back (as by another node), with the same secret and mappings
    const id = newId('con')
    await h.node.deps.sql`insert into connectors (id, account_id, provider, name, secret_sealed, mappings, email_keys)
      select ${id}, account_id, provider, 'elsewhere', secret_sealed, mappings, email_keys from connectors where id = ${s.connector.id}`
    const early = purchase()
    const unknownYet = await deliver(h, `/hooks/${id}`, early, stripeHeaders(early))
    expectProblem(unknownYet, 400, 'invalid_request')
    expect(await eventsOf(id)).toEqual([]) // answered without reading the connector
    await Bun.sleep(RELOAD_MS + 100)
    const later = purchase()
    expect((await deliver(h, `/hooks/${id}`, later, stripeHeaders(later))).status).toBe(200)
  })

  test('a flood of one connector id is 429 with Retry-After once its burst is spent, known or not', async () => {
    for (const id of [ghostId('con'), (await connectorSetup(h, 'stripe', ['price_a'])).connector.id]) {
      const payload = purchase()
      const headers = await stripeHeaders(payload, { secret: 'whsec_wrong' })
      const answers = await Promise.all(Array.from({ length: 130 }, () => deliver(h, `/hooks/${id}`, payload, headers)))
      const limited = answers.filter((r) => r.status === 429)
      expect(answers.filter((r) => r.status === 400).length).toBeGreaterThan(0)
      expect(limited.length).toBeGreaterThan(0)
      expect(answers.every((r) => r.status === 400 || r.status === 429)).toBe(true)
      expectProblem(limited[0]!, 429, 'rate_limited')
      expect(Number(limited[0]!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    }
  })

  test('a flood from one address is 429 past its burst, whatever the ids', async () => {
    await Bun.sleep(5_000) // the previous test spent most of this address's burst: let it refill
    const payload = purchase()
    const headers = await stripeHeaders(payload)
    const answers = await Promise.all(Array.from({ length: 260 }, () => deliver(h, `/hooks/${ghostId('con')}`, payload, headers)))
    expect(answers.filter((r) => r.status === 429).length).toBeGreaterThan(0)
    expect(answers.filter((r) => r.status === 400).length).toBeGreaterThan(0)
  })
})

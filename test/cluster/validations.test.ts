// Validate answers by outcome are counted on each node and meet in Postgres: two nodes' answers add up,
// and the day's columns sum to its api_calls_today (shared through Redis), within one flush interval.
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { createLogger } from '../../src/infra/log'
import { startNode, type Node } from '../../src/node'
import { client, fingerprint, newKey, newProduct, scopedToken, useHarness } from '../support/harness'
import { until } from '../validation/support'
import { requireEnvironment } from '../support/environment'

setDefaultTimeout(120_000)
const extraNodes: Node[] = []
afterAll(async () => {
  for (const n of extraNodes) await n.stop()
}) // registered before the harness: these nodes stop before its database goes
const h = useHarness({ env: { FLUSH_INTERVAL_MS: '200' } })
const cluster = await requireEnvironment('cluster/validations', ['postgres', 'redis'])

test.skipIf(!cluster)('two nodes: each counts its answers, the route shows their sum', async () => {
  const { token } = await h.account('growth')
  const validator = await scopedToken(h.call, token, 'validate')
  const product = await newProduct(h.call, token)
  const key = await newKey(h.call, token, product.id, { activation_limit: 1 })
  const second = await startNode(h.config, { log: createLogger(h.config.logLevel) })
  extraNodes.push(second)
  const calls = [h.call, client(second.url)]
  const device = fingerprint()
  for (let i = 0; i < 20; i++) {
    const body = i % 4 === 3 ? { key: 'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE', device_fingerprint: device }
      : i % 4 === 2 ? { key: key.key_value, device_fingerprint: fingerprint() }
      : { key: key.key_value, device_fingerprint: device }
    expect((await calls[i % 2]!('POST', '/v1/validate', { token: validator, body })).status).toBe(200)
  }
  const sum = (e: Record<string, number>) => e.valid + e.not_found + e.revoked + e.expired + e.activation_limit + e.rate_limited
  for (const call of calls) {
    const res = await until(() => call('GET', '/v1/analytics/validations?range=7d', { token }), (r) => sum(r.body.at(-1)) === 20)
    expect(res.body.at(-1)).toMatchObject({ valid: 10, activation_limit: 5, not_found: 5, revoked: 0, expired: 0, rate_limited: 0 })
    const overview = await until(() => call('GET', '/v1/analytics/overview', { token }), (r) => r.body.api_calls_today === 20)
    expect(overview.body.api_calls_today).toBe(sum(res.body.at(-1)))
  }
})

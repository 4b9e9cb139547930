// Limits that must hold exactly: activation slots under concurrency (one node, and two nodes on one
// Postgres when DATABASE_URL is set) and the daily validate quota.
import { describe, expect, test } from 'bun:test'
import { startNode } from '../../src/node'
import { client, realPostgres, useHarness, testConfig } from '../support/harness'
import { activationRows, events, fingerprint, setup, validate } from './support'

const h = useHarness()

describe('activation slots under concurrency', () => {
  test('20 devices race for a key with limit 3: exactly 3 valid, 3 rows, 3 events', async () => {
    const { token, key } = await setup(h, { activation_limit: 3 })
    const devices = Array.from({ length: 20 }, fingerprint)
    const answers = await Promise.all(devices.map((d) => validate(h.call, token, { key: key.key_value, device_fingerprint: d })))
    expect(answers.every((a) => a.status === 200)).toBe(true)
    const valid = answers.filter((a) => a.body.valid)
    expect(valid).toHaveLength(3)
    expect(answers.filter((a) => a.body.reason === 'activation_limit')).toHaveLength(17)
    const rows = await activationRows(h.node.deps.sql, key.id)
    expect(rows).toHaveLength(3)
    expect(new Set(rows.map((r) => r.device_fingerprint))).toEqual(
      new Set(devices.filter((_, i) => answers[i].body.valid)),
    )
    expect(await events(h.node.deps.sql, 'activation.created', key.id)).toHaveLength(3)
  })

  test('one device validating 10 times at once takes one slot', async () => {
    const { token, key } = await setup(h, { activation_limit: 3 })
    const fp = fingerprint()
    const answers = await Promise.all(Array.from({ length: 10 }, () => validate(h.call, token, { key: key.key_value, device_fingerprint: fp })))
    expect(answers.every((a) => a.body.valid === true && a.body.activations_used === 1)).toBe(true)
    expect(await activationRows(h.node.deps.sql, key.id)).toHaveLength(1)
    expect(await events(h.node.deps.sql, 'activation.created', key.id)).toHaveLength(1)
  })

  test('two nodes on one database: 20 devices, limit 3, exactly 3 activations', async () => {
    // Real Postgres: a second node with its own pool (and NATS when NATS_URL is set). Embedded: a
    // second node on the same PGlite connection (separate hot state and bus; the decision is in SQL).
    const second = await startNode(testConfig({}, h.db.url), realPostgres ? {} : { db: await h.db.open() })
    try {
      const { token, key } = await setup(h, { activation_limit: 3 })
      const calls = [h.call, client(second.url)]
      const devices = Array.from({ length: 20 }, fingerprint)
      const answers = await Promise.all(
        devices.map((d, i) => validate(calls[i % 2], token, { key: key.key_value, device_fingerprint: d })),
      )
      expect(answers.filter((a) => a.body.valid)).toHaveLength(3)
      expect(await activationRows(h.node.deps.sql, key.id)).toHaveLength(3)
      expect(await events(h.node.deps.sql, 'activation.created', key.id)).toHaveLength(3)
      // both nodes agree on who holds the slots afterwards
      for (const [i, d] of devices.entries()) {
        for (const call of calls) {
          expect((await validate(call, token, { key: key.key_value, device_fingerprint: d })).body.valid).toBe(answers[i].body.valid)
        }
      }
    } finally {
      await second.stop()
    }
  })
})

describe('daily validate quota', () => {
  test('Free plan: exactly 500 of 600 calls pass, then 429 with retry_after until UTC midnight', async () => {
    const { accountId, token, key } = await setup(h, {}, 'free')
    // malformed calls are refused before counting
    for (let i = 0; i < 5; i++) expect((await h.call('POST', '/v1/validate', { token, body: { key: 'x' } })).status).toBe(400)
    const fp = fingerprint()
    const statuses: number[] = []
    let limited: Awaited<ReturnType<typeof validate>> | null = null
    for (let batch = 0; batch < 30; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          // valid and not_found answers count alike
          validate(h.call, token, { key: i % 4 === 0 ? 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' : key.key_value, device_fingerprint: fp }),
        ),
      )
      for (const a of answers) {
        statuses.push(a.status)
        if (a.status === 429) limited ??= a
      }
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(500)
    expect(statuses.filter((s) => s === 429)).toHaveLength(100)
    expect(limited!.body).toMatchObject({ code: 'rate_limited', status: 429 })
    const now = new Date()
    const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)
    const expected = Math.ceil((midnight - Date.now()) / 1000)
    expect(Math.abs(limited!.body.retry_after - expected)).toBeLessThanOrEqual(5)
    expect(limited!.headers.get('retry-after')).toBe(String(limited!.body.retry_after))
    // refused calls are not counted: the account used exactly its 500
    expect(await h.node.deps.counters.today(accountId)).toBe(500)
    // deactivation is not a validate call and stays available
    expect((await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: fp } })).body.deactivated).toBe(true)
  })
})

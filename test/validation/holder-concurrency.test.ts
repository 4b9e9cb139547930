// The holder routes' per-account bucket bounds the Postgres work, not only the count of calls
// (modules/validation/holder-gate.ts): an account's calls to /v1/devices and /v1/deactivate run at
// most 2 at a time on a node, 32 more wait their turn, past that 429; another account is not queued
// behind them. Before, a flood inside the rate held as much of the pool as it liked.
import { expect, setDefaultTimeout, test } from 'bun:test'
import type { Principal } from '../../src/core/principal'
import type { Sql } from '../../src/infra/db'
import { ValidationEngine } from '../../src/modules/validation/service'
import { useHarness } from '../support/harness'
import { fingerprint, setup, validate } from './support'

setDefaultTimeout(60_000)
const h = useHarness()

/** The node's Postgres, each statement held 5 ms before it is sent, counting those in flight at once. */
function slowed(sql: Sql): { sql: Sql; maxInFlight: () => number } {
  let inFlight = 0
  let max = 0
  const wrapped = new Proxy(sql, {
    apply(target, self, args) {
      const query = Reflect.apply(target as never, self, args) as PromiseLike<unknown>
      // a fragment (sql`…` inside another statement) is never awaited: only statements count
      const then = query.then.bind(query)
      Object.defineProperty(query, 'then', {
        value: (ok: (v: unknown) => unknown, fail: (e: unknown) => unknown) => {
          max = Math.max(max, ++inFlight)
          return Bun.sleep(5)
            .then(() => then((v) => v, (e) => Promise.reject(e)))
            .finally(() => inFlight--)
            .then(ok, fail)
        },
      })
      return query
    },
  })
  return { sql: wrapped, maxInFlight: () => max }
}

test("an account's holder calls use Postgres 2 at a time on a node, 32 wait, the rest are 429; another account is not held up", async () => {
  const a = await setup(h)
  const b = await setup(h)
  expect((await validate(h.call, a.token, { key: a.key.key_value, device_fingerprint: fingerprint() })).body.valid).toBe(true)
  const db = slowed(h.node.deps.sql)
  // a bucket too large to matter: only the concurrency is tested
  const engine = new ValidationEngine({ ...h.node.deps, sql: db.sql, config: { ...h.node.deps.config, holderRateBurst: 10_000 } })
  const who = (x: { accountId: string }): Principal => ({ apiKeyId: 'ak_test', accountId: x.accountId, scope: 'validate', plan: 'free', tokenHash: 'test' })
  try {
    const done: string[] = []
    const flood = Array.from({ length: 40 }, (_, i) =>
      (i % 4 === 0
        ? engine.holders.deactivate(who(a), { key: a.key.key_value, device_fingerprint: fingerprint() })
        : engine.holders.devices(who(a), { key: a.key.key_value })
      ).then(
        () => (done.push('a'), 'ok'),
        (err: { code?: string; extra?: { retryAfter?: number } }) => (done.push('a'), `${err.code}:${err.extra?.retryAfter}`),
      ),
    )
    const other = engine.holders.devices(who(b), { key: b.key.key_value }).then((answer) => (done.push('b'), answer))
    const answers = await Promise.all(flood)
    expect((await other).activation_limit).toBeGreaterThan(0)
    expect(answers.filter((r) => r === 'ok')).toHaveLength(34)
    expect(answers.filter((r) => r !== 'ok')).toEqual(Array(6).fill('rate_limited:1'))
    // b's one call ran beside a's two, not after a's queue
    expect(done.indexOf('b')).toBeLessThan(done.lastIndexOf('a'))
    expect(db.maxInFlight()).toBeLessThanOrEqual(3)
    // and the account's next call is admitted again
    expect((await engine.holders.devices(who(a), { key: a.key.key_value })).activations_used).toBe(1)
  } finally {
    await engine.close()
  }
})

// The holder's routes (POST /v1/devices, POST /v1/deactivate) cost Postgres work, so: unknown keys are
// answered from the node's memory (the hot state and its negative entries, as validate does), and each
// account has a rate on each node (HOLDER_RATE_PER_SECOND, HOLDER_RATE_BURST), past which the answer is
// 429 rate_limited like validate's, with retry_after and Retry-After.
import { expect, setDefaultTimeout, test } from 'bun:test'
import type { Principal } from '../../src/core/principal'
import type { Sql } from '../../src/infra/db'
import { ValidationEngine } from '../../src/modules/validation/service'
import { expectProblem } from '../support/helpers'
import { useHarness } from '../support/harness'
import { fingerprint, setup, validate } from './support'

setDefaultTimeout(60_000)
const BURST = 5
const h = useHarness({ env: { HOLDER_RATE_PER_SECOND: '2', HOLDER_RATE_BURST: String(BURST) } })

/** The node's Postgres, counting every statement (and transaction) started through it. */
function counting(sql: Sql): { sql: Sql; count: () => number } {
  let n = 0
  const wrapped = new Proxy(sql, {
    apply(target, self, args) {
      n++
      return Reflect.apply(target as never, self, args)
    },
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver)
      if (prop === 'begin' || prop === 'unsafe') {
        return (...args: unknown[]) => {
          n++
          return (value as (...a: unknown[]) => unknown).apply(target, args)
        }
      }
      return value
    },
  })
  return { sql: wrapped, count: () => n }
}

const randomKeyValue = () =>
  Array.from({ length: 5 }, () => Array.from({ length: 5 }, () => '0123456789ABCDEFGHJKMNPQRSTVWXYZ'[Math.floor(Math.random() * 32)]).join('')).join('-')

test('unknown keys, other accounts\' keys and other products are answered without Postgres once known', async () => {
  const mine = await setup(h)
  const theirs = await setup(h)
  // their key is in this node's memory (validated by its own account)
  expect((await validate(h.call, theirs.token, { key: theirs.key.key_value, device_fingerprint: fingerprint() })).body.valid).toBe(true)

  const db = counting(h.node.deps.sql)
  const engine = new ValidationEngine({ ...h.node.deps, sql: db.sql, config: { ...h.node.deps.config, holderRateBurst: 1_000 } })
  try {
    const who: Principal = { apiKeyId: 'ak_test', accountId: mine.accountId, scope: 'validate', plan: 'growth', tokenHash: 'test' }
    const unknown = randomKeyValue()
    // the first ask reads Postgres once and keeps a negative entry
    await expect(engine.holders.devices(who, { key: unknown })).rejects.toMatchObject({ code: 'not_found' })
    const afterFirst = db.count()
    expect(afterFirst).toBeGreaterThan(0)
    for (let i = 0; i < 20; i++) {
      await expect(engine.holders.devices(who, { key: unknown })).rejects.toMatchObject({ code: 'not_found' })
      expect(await engine.holders.deactivate(who, { key: unknown, device_fingerprint: fingerprint() })).toEqual({ deactivated: false, activations_used: 0, activation_limit: 0 })
      // too short to be any key (Keyward's have 25 characters, imported ones 6 to 256): no lookup at all
      await expect(engine.holders.devices(who, { key: 'short' })).rejects.toMatchObject({ code: 'not_found' })
    }
    expect(db.count()).toBe(afterFirst)

    // another account's key, once this engine has read it: not this account's, no Postgres
    await expect(engine.holders.devices(who, { key: theirs.key.key_value })).rejects.toMatchObject({ code: 'not_found' })
    const known = db.count()
    for (let i = 0; i < 10; i++) {
      await expect(engine.holders.devices(who, { key: theirs.key.key_value })).rejects.toMatchObject({ code: 'not_found' })
      expect((await engine.holders.deactivate(who, { key: theirs.key.key_value, device_fingerprint: fingerprint() })).deactivated).toBe(false)
    }
    expect(db.count()).toBe(known)
    // this account's own key of another product: 404 from memory too; without product_id it is listed (from Postgres)
    await expect(engine.holders.devices(who, { key: mine.key.key_value, product_id: 'prod_other' })).rejects.toMatchObject({ code: 'not_found' })
    const own = db.count()
    await expect(engine.holders.devices(who, { key: mine.key.key_value, product_id: 'prod_other' })).rejects.toMatchObject({ code: 'not_found' })
    expect(db.count()).toBe(own)
    expect((await engine.holders.devices(who, { key: mine.key.key_value })).devices).toEqual([])
    expect(db.count()).toBeGreaterThan(own)
  } finally {
    await engine.close()
  }
})

test('past the account\'s burst both routes answer 429 with retry_after and Retry-After, other accounts unaffected, and it recovers', async () => {
  const a = await setup(h)
  const b = await setup(h)
  const device = fingerprint()
  expect((await validate(h.call, a.token, { key: a.key.key_value, device_fingerprint: device })).body.valid).toBe(true)
  const devices = (who: { token: string; key: { key_value: string } }) => h.call('POST', '/v1/devices', { token: who.token, body: { key: who.key.key_value } })
  const deactivate = (who: { token: string; key: { key_value: string } }) =>
    h.call('POST', '/v1/deactivate', { token: who.token, body: { key: who.key.key_value, device_fingerprint: fingerprint() } })

  // the burst is shared by both routes: BURST + 2 calls sent at once (taken within milliseconds, so the
  // 2 per second that come back meanwhile do not blur the count, however loaded the machine)
  const answers = await Promise.all(Array.from({ length: BURST + 2 }, (_, i) => (i % 2 === 0 ? devices(a) : deactivate(a))))
  expect(answers.filter((r) => r.status === 200)).toHaveLength(BURST)
  const limited = answers.filter((r) => r.status !== 200)
  expect(limited).toHaveLength(2)
  for (const r of limited) {
    expectProblem(r, 429, 'rate_limited')
    expect(r.body.retry_after).toBeGreaterThanOrEqual(1)
    expect(r.headers.get('retry-after')).toBe(String(r.body.retry_after))
  }
  // another account has its own bucket; validate is not affected
  expect((await devices(b)).status).toBe(200)
  expect((await validate(h.call, a.token, { key: a.key.key_value, device_fingerprint: device })).body.valid).toBe(true)

  // tokens come back at the configured rate
  await Bun.sleep(1_100)
  const again = await devices(a)
  expect(again.status).toBe(200)
  expect(again.body.devices.map((d: { device_fingerprint: string }) => d.device_fingerprint)).toEqual([device])
})

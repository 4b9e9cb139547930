// The engine reuses one record of a call's facts for every call it answers from memory, and a call
// that waits (a new device's claim) keeps a copy of its own (src/modules/validation/check.ts). Calls of
// two accounts, answered from memory and waiting on Postgres, interleaved: each activation keeps its
// own call's account, fingerprint and country, and each answer is counted once under its own
// account and product.
import { expect, test } from 'bun:test'
import { useHarness } from '../support/harness'
import { fingerprint, setup, validate } from './support'

const h = useHarness()
const ROUNDS = 12

test('interleaved calls of two accounts keep their own facts: activations and counts', async () => {
  const a = await setup(h, { activation_limit: 100 })
  const b = await setup(h, { activation_limit: 100 })
  const knownA = fingerprint()
  const knownB = fingerprint()
  for (const [who, fp] of [[a, knownA], [b, knownB]] as const) {
    expect((await validate(h.call, who.token, { key: who.key.key_value, device_fingerprint: fp })).body.valid).toBe(true)
  }

  const newA = Array.from({ length: ROUNDS }, () => fingerprint())
  const newB = Array.from({ length: ROUNDS }, () => fingerprint())
  const calls: Promise<{ body: any }>[] = []
  for (let i = 0; i < ROUNDS; i++) {
    // a new device (the claim waits on Postgres) between calls answered from memory, of the other account
    calls.push(validate(h.call, a.token, { key: a.key.key_value, device_fingerprint: newA[i] }, { 'cf-ipcountry': 'de' }))
    calls.push(validate(h.call, b.token, { key: b.key.key_value, device_fingerprint: knownB }, { 'cf-ipcountry': 'US' }))
    calls.push(validate(h.call, b.token, { key: b.key.key_value, device_fingerprint: newB[i] }, { 'cf-ipcountry': 'FR' }))
    calls.push(validate(h.call, a.token, { key: a.key.key_value, device_fingerprint: knownA }, { 'cf-ipcountry': 'JP' }))
    calls.push(validate(h.call, b.token, { key: `no-such-key-${i}`, device_fingerprint: knownB }))
  }
  const answers = await Promise.all(calls)
  answers.forEach((r, i) => expect(r.body.valid).toBe(i % 5 !== 4))

  const rows = await h.node.deps.sql<{ key_id: string; device_fingerprint: string; country: string | null }[]>`
    select key_id, device_fingerprint, country from activations where key_id in (${a.key.id}, ${b.key.id}) and status = 'active'`
  const of = (keyId: string) => new Map(rows.filter((r) => r.key_id === keyId).map((r) => [r.device_fingerprint, r.country]))
  const seatsA = of(a.key.id)
  const seatsB = of(b.key.id)
  expect([...seatsA.keys()].sort()).toEqual([knownA, ...newA].sort())
  expect([...seatsB.keys()].sort()).toEqual([knownB, ...newB].sort())
  for (const fp of newA) expect(seatsA.get(fp)).toBe('DE')
  for (const fp of newB) expect(seatsB.get(fp)).toBe('FR')

  await h.node.deps.validation.flush()
  const counts = await h.node.deps.sql<{ account_id: string; product_id: string; valid: string; not_found: string }[]>`
    select account_id, product_id, sum(valid)::text as valid, sum(not_found)::text as not_found from analytics_daily_validations
    where account_id in (${a.accountId}, ${b.accountId}) group by account_id, product_id order by account_id, product_id`
  const count = (account: string, product: string) => counts.find((c) => c.account_id === account && c.product_id === product)
  // the first validate of each key, then two valid answers per round for each account
  expect(Number(count(a.accountId, a.product.id)?.valid)).toBe(1 + 2 * ROUNDS)
  expect(Number(count(b.accountId, b.product.id)?.valid)).toBe(1 + 2 * ROUNDS)
  // B's unknown key counts under no product, and A has none
  expect(Number(count(b.accountId, '')?.not_found)).toBe(ROUNDS)
  expect(count(a.accountId, '')).toBeUndefined()
})

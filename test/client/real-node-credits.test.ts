// The SDK against a real node, for metered keys: validate({ cost }) spends on the node and reports
// creditsRemaining, a typed credits_exhausted refusal with refillsAt, and no fallback to the stored
// answer for a metered call that spends while the node cannot be reached (cost 0 still may).
import { beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, useHarness } from '../support/harness'
import { Keyward, memoryStorage, UnreachableError, type FetchLike, type KeywardOptions, type ValidateResult } from '../../client/src/index.ts'
import { rejection } from '../../client/test/support/rejection'
import { vendorOn } from './vendor'

setDefaultTimeout(60_000)
const h = useHarness()

let token: string
let validateToken: string
let productId: string
let publicKey: string
beforeAll(async () => {
  const vendor = await vendorOn(h)
  ;({ token, validateToken, productId } = vendor)
  publicKey = vendor.publicKey.raw
})

const sdk = (opts: Partial<KeywardOptions> = {}) =>
  new Keyward({ baseUrl: h.node.url, token: validateToken, publicKey, productId, storage: memoryStorage(), retries: 0, backoffMs: 1, ...opts })

function mustBeValid(r: ValidateResult) {
  if (!r.valid) throw new Error(`expected a valid answer, got ${r.reason}`)
  return r
}

test('cost is spent on the node; creditsRemaining follows it; below the cost: credits_exhausted with refillsAt', async () => {
  const k = await newKey(h.call, token, productId, { credits: { remaining: 10, refill: { amount: 10, interval: 'month', day_of_month: 1 } } })
  const kw = sdk()
  expect(mustBeValid(await kw.validate({ key: k.key_value, cost: 4 })).creditsRemaining).toBe(6)
  expect(mustBeValid(await kw.validate({ cost: 6 })).creditsRemaining).toBe(0)
  const r = await kw.validate()
  if (r.valid || r.reason !== 'credits_exhausted') throw new Error(`expected credits_exhausted, got ${JSON.stringify(r)}`)
  expect(r.creditsRemaining).toBe(0)
  expect(r.refillsAt).toEqual(new Date(k.credits.refills_at))
  expect(r.refillsAt!.getUTCDate()).toBe(1)
  // an unmetered key: null
  const plain = await newKey(h.call, token, productId)
  expect(mustBeValid(await sdk().validate({ key: plain.key_value, cost: 7 })).creditsRemaining).toBeNull()
})

test('unreachable: a metered call that spends throws rather than stand on the stored answer; cost 0 is answered from it', async () => {
  const k = await newKey(h.call, token, productId, { credits: { remaining: 100 } })
  const down = { on: false }
  const fetch: FetchLike = (input, init) => (down.on ? Promise.reject(new TypeError('fetch failed')) : globalThis.fetch(input, init))
  const kw = sdk({ fetch, graceSeconds: 3600 })
  mustBeValid(await kw.validate({ key: k.key_value }))
  down.on = true
  expect(await rejection(kw.validate())).toBeInstanceOf(UnreachableError)
  expect(await rejection(kw.validate({ cost: 2 }))).toBeInstanceOf(UnreachableError)
  expect(await kw.validate({ cost: 0 })).toMatchObject({ valid: true, offline: true })
  down.on = false
  // nothing was spent while away
  expect(mustBeValid(await kw.validate({ cost: 0 })).creditsRemaining).toBe(99)
})

// `bun test/bench/held-objects.ts`: what the hot state's objects for keys in use cost (hot-state.ts):
// BENCH_HELD keys (default 65,536, the engine's memo of key values) are packed, then each is looked up
// as the engine does (a KeyRef), given a valid answer with its JSON text, and kept; printed: RSS grown
// per object held. No node, no Postgres: this measures the objects alone.
import { hash, randomBytes } from 'node:crypto'
import { answerText, validAnswerOf } from '../../src/modules/validation/answers'
import { HotState, type KeyRef, type KeyState } from '../../src/modules/validation/hot/hot-state'
import { NO_ENTITLEMENTS } from '../../src/modules/validation/hot/key-row'

const N = Number(process.env.BENCH_HELD ?? 65_536)
const hot = new HotState(async () => null, { ttlMs: 3_600_000, degradedTtlMs: 60_000, maxKeys: Math.max(N, 1_000_000) })
const keys: string[] = []
for (let i = 0; i < N; i++) {
  const key = hash('sha256', `held-${i}-${Math.random()}`, 'base64')
  keys.push(key)
  hot.put(key, {
    accountId: `acct_${i % 1000}`, productId: `prod_${i % 1000}`, status: 'active', plan: i % 2 ? 'pro' : null,
    expiresAt: i % 3 ? Date.now() + 86_400_000 * 365 : null, limit: 3, devices: [randomBytes(32).toString('hex')],
    entitlements: NO_ENTITLEMENTS, graceMs: 0, keep: false, policyId: null, own: null, oneKeyPerDevice: false, metered: false, relaySeats: 0,
  })
}
const settle = async () => {
  Bun.gc(true)
  await Bun.sleep(200)
  Bun.gc(true)
}
await settle()
const before = process.memoryUsage().rss
const refs: KeyRef[] = []
const now = Date.now()
for (const key of keys) {
  const ref: KeyRef = { hotKey: key, view: null }
  answerText(validAnswerOf(hot.getRef(ref, now) as KeyState, 1, now))
  refs.push(ref)
}
await settle()
console.log(`${refs.length.toLocaleString('en')} objects held, each with its valid answer and JSON text: ` +
  `${Math.round((process.memoryUsage().rss - before) / N)} B each (RSS grown, same process)`)

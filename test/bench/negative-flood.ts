// `bun test/bench/negative-flood.ts`: validate of known keys while someone floods unknown keys.
// N known keys are warmed into a hot state sized for them, then F random unknown keys arrive, with a
// round of known-key lookups after every FLOOD_SLICE unknown ones. Printed per layout: known-key hit
// ratio during the flood (answered from memory, no I/O), reads of known keys the flood caused
// (Postgres loads), and RSS before vs after the flood. Two layouts, each in its own process so RSS is
// its own: `apart` (today: negative entries in their own fixed-size table) and `shared` (the previous
// layout, reproduced here: negative entries counted against the known keys' bound, CLOCK over both).
// The loader stands in for Postgres (an awaited Map read): this measures the cache, not the database.
//
//   BENCH_KNOWN=100000 BENCH_FLOOD=1000000 bun test/bench/negative-flood.ts
import { randomBytes } from 'node:crypto'
import { HotState, type KeyRow, type KeyState } from '../../src/modules/validation/hot/hot-state'

const KNOWN = Number(process.env.BENCH_KNOWN ?? 100_000)
const FLOOD = Number(process.env.BENCH_FLOOD ?? 1_000_000)
const SLICE = Number(process.env.BENCH_FLOOD_SLICE ?? 1_000)
const PROBES = Number(process.env.BENCH_PROBES ?? 1_000)

/** The previous layout: unknown keys held in the known keys' map, under the same bound. */
class SharedSpace extends HotState {
  private absentAt = new Map<string, number>()
  protected override absentSince(k: string) {
    return this.absentAt.get(k)
  }
  protected override keep(k: string, state: KeyState | null, at: number) {
    if (state !== null) return super.keep(k, state, at)
    this.table.delete(k)
    this.absentAt.set(k, at)
    // one bound for both kinds, evicted in queue order: a victim of either kind, in proportion (as CLOCK over a mixed queue)
    while (this.table.size + this.absentAt.size > KNOWN) {
      const victim = this.absentAt.size > 0 && Math.random() < this.absentAt.size / (this.table.size + this.absentAt.size)
      if (victim) this.absentAt.delete(this.absentAt.keys().next().value!)
      else this.table.evictOne()
    }
  }
  override get unknownSize() {
    return this.absentAt.size
  }
}

const row: KeyRow = { accountId: 'acct_1', productId: 'prod_1', status: 'active', plan: null, expiresAt: null, limit: 3, devices: ['d'], entitlements: {}, graceMs: 0, keep: false, policyId: null, own: null, oneKeyPerDevice: false, metered: false, relaySeats: 0 }
const mb = (n: number) => `${(n / 1048576).toFixed(0)} MB`

async function run(layout: 'apart' | 'shared') {
  const known = Array.from({ length: KNOWN }, () => randomBytes(32).toString('base64'))
  const knownSet = new Set(known)
  let knownLoads = 0
  const loader = async (k: string) => {
    await null
    if (!knownSet.has(k)) return null
    knownLoads++
    return row
  }
  const opts = { ttlMs: 600_000, degradedTtlMs: 2_000, maxKeys: KNOWN, maxUnknownKeys: 65_536 }
  const hot = layout === 'apart' ? new HotState(loader, opts) : new SharedSpace(loader, opts)
  for (const k of known) await hot.get(k)
  knownLoads = 0
  Bun.gc(true)
  const rssBefore = process.memoryUsage.rss()
  let hits = 0
  let probes = 0
  for (let i = 0; i < FLOOD; i++) {
    await hot.get(randomBytes(32).toString('base64'))
    if ((i + 1) % SLICE === 0) {
      for (let p = 0; p < PROBES; p++) {
        const s = hot.get(known[(Math.random() * KNOWN) | 0])
        probes++
        if (s instanceof Promise) await s
        else hits++
      }
    }
  }
  Bun.gc(true)
  const rssAfter = process.memoryUsage.rss()
  console.log(JSON.stringify({ layout, hitRatio: hits / probes, knownLoads, probes, rssBefore, rssAfter, size: hot.size, unknown: hot.unknownSize }))
}

const variant = process.argv[2]
if (variant === 'apart' || variant === 'shared') await run(variant)
else {
  console.log(`negative flood: ${KNOWN.toLocaleString('en')} known keys (CACHE_MAX_KEYS = that), ${FLOOD.toLocaleString('en')} unknown keys, ${PROBES} known lookups after every ${SLICE} unknown`)
  for (const layout of ['shared', 'apart']) {
    const out = Bun.spawnSync(['bun', import.meta.path, layout], { stdout: 'pipe', stderr: 'inherit' }).stdout.toString().trim()
    const r = JSON.parse(out.split('\n').pop()!)
    console.log(
      `  ${layout === 'apart' ? 'apart (today)   ' : 'shared (before) '} known-key hit ratio ${(r.hitRatio * 100).toFixed(1)}%, ` +
        `known-key loads ${r.knownLoads.toLocaleString('en')} of ${r.probes.toLocaleString('en')} lookups, ` +
        `RSS ${mb(r.rssBefore)} → ${mb(r.rssAfter)} (+${mb(r.rssAfter - r.rssBefore)}), held: ${r.size.toLocaleString('en')} known, ${r.unknown.toLocaleString('en')} negative`,
    )
  }
}

// `bun run bench:handler`: what the validate fast path costs per call in JavaScript, without the network.
// A node runs in this process; its POST /v1/validate handler and the handler of baseline (a) (the
// same JSON body answered from a Map, as in validate.ts) are called directly on prebuilt Requests, in
// alternating slices, and the CPU time per call is reported (median over the slices). Kernel and HTTP
// parsing costs are the same for every handler, so this isolates the stack's own work, which the wrk
// benchmark sees only through a lot of noise on a shared 2-core VM. The same engine over the previous
// hot-state layout (test/bench/map-hot-state.ts) is one more handler of the rotation.
//
//   DATABASE_URL=postgres://… bun run bench:handler    (embedded PGlite otherwise; only setup touches it)
//   BENCH_CALLS=5000 BENCH_ROUNDS=60   (short slices, many rounds: the VM's speed drifts over seconds)
import { Signers } from '../../src/modules/signing/signers'
import { fastValidate } from '../../src/modules/validation/fast-path'
import { prepareBenchKey } from './fixture'
import { median } from './stats'
import { startInProcessNode } from './servers'
import { mapHandler, strictHandler } from './validate-roles'
import { MapHotState } from './map-hot-state'
import { keyHashOf } from '../../src/modules/validation/hot/hot-state'
import { loadKeyState } from '../../src/modules/validation/repo'

const CALLS = Number(process.env.BENCH_CALLS ?? 5_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 60)

const { node, stop } = await startInProcessNode('handler')
try {
  const { token, body, keyValue, fingerprint, answer } = await prepareBenchKey(node.url)
  const full = fastValidate(node.deps, node.deps.validation, new Signers(node.deps.sql, node.deps.secretKey))
  const baseline = mapHandler(keyValue, fingerprint)
  const strict = strictHandler(keyValue, fingerprint, answer)
  const headers = { host: '127.0.0.1', 'content-type': 'application/json', authorization: `Bearer ${token}`, 'content-length': String(body.length) }
  const signedHeaders = { ...headers, 'keyward-nonce': 'bench-nonce-0123456789abcdef_XYZ' }
  const requests = (h: Record<string, string>) =>
    Array.from({ length: CALLS }, () => new Request('http://127.0.0.1/v1/validate', { method: 'POST', headers: h, body }))
  // The same engine over the previous hot-state layout (map-hot-state.ts), swapped in for its slices:
  // what the packed layout (key-table.ts) changes on the hot path, measured in this process.
  const engine = node.deps.validation
  const packedHot = engine.hot
  const { config: c, sql, bus } = node.deps
  const mapHot = new MapHotState((hotKey) => loadKeyState(sql, keyHashOf(hotKey)), { ttlMs: c.cacheTtlMs, degradedTtlMs: c.degradedTtlMs, maxKeys: c.cacheMaxKeys }, bus)
  const using = (hot: unknown) => (req: Request) => {
    ;(engine as { hot: unknown }).hot = hot
    return full(req)
  }
  const handlers: [string, (r: Request) => Response | Promise<Response>, Record<string, string>][] = [
    ['only building the Request (subtracted)', () => new Response(null), headers],
    ['(a) Bun.serve handler: JSON + Map', baseline, headers],
    ['Keyward fast path (full stack)', using(packedHot), headers],
    ['the same, signed (Keyward-Nonce)', using(packedHot), signedHeaders],
    ['(s) strict minimal endpoint', strict, headers],
    ['full stack, previous hot-state layout', using(mapHot), headers],
  ]
  const cpuNs = handlers.map(() => [] as number[])
  for (let round = 0; round < ROUNDS + 1; round++) {
    for (const [i, [, handle, h]] of handlers.entries()) {
      const batch = requests(h)
      Bun.gc(true)
      const before = process.cpuUsage()
      for (const req of batch) {
        const res = await handle(req)
        if (res.status !== 200) throw new Error(`status ${res.status}`)
      }
      const used = process.cpuUsage(before)
      if (round > 0) cpuNs[i].push(((used.user + used.system) * 1000) / CALLS) // round 0 warms up the JIT
    }
  }
  const none = median(cpuNs[0])
  console.log(`validate handler CPU per call, in process (${ROUNDS} rounds × ${CALLS.toLocaleString('en')} calls, medians; GC included):`)
  for (const [i, [name]] of handlers.entries()) {
    const m = median(cpuNs[i])
    console.log(`  ${name.padEnd(40)} ${m.toFixed(0).padStart(6)} ns${i > 0 ? `   handler: ${(m - none).toFixed(0).padStart(5)} ns` : ''}`)
  }
  // Paired within each round (slices a few ms apart), so the VM's drifting speed cancels out.
  const [, a, f, s, strictNs] = cpuNs
  console.log(`  the stack's own work over (a): ${median(f.map((x, i) => x - a[i])).toFixed(0)} ns per call ` +
    `(full / (a) per call: ${median(f.map((x, i) => x / a[i])).toFixed(2)}x)`)
  console.log(`  the stack's own work over (s) strict minimal: ${median(f.map((x, i) => x - strictNs![i]!)).toFixed(0)} ns per call`)
  console.log(`  a signed answer over an unsigned one: ${median(s.map((x, i) => x - f[i])).toFixed(0)} ns per call`)
  const previous = cpuNs[5]
  console.log(`  packed hot state over the previous layout: ${median(f.map((x, i) => x - previous[i])).toFixed(0)} ns per call ` +
    `(full stack, packed / previous per call: ${median(f.map((x, i) => x / previous[i])).toFixed(3)}x)`)
  ;(engine as { hot: unknown }).hot = packedHot
  mapHot.close()
} finally {
  await stop()
}

// `bun run bench:memory`: the resident memory of a node holding BENCH_KEYS keys (default 1,000,000,
// one active device each) in its hot state, for the packed layout (key-table.ts) and, as the reference
// in the same run, the previous layout (map-hot-state.ts: a Map of one object per key). Each layout is
// filled in a fresh node process (validate-roles.ts, role `memory`), in alternation when
// BENCH_ROUNDS > 1; a filled key is then validated over HTTP, so the entries are live ones.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun run bench:memory
//   BENCH_KEYS=1000000 BENCH_ROUNDS=2 BENCH_DEVICES=1 bun run bench:memory   (embedded PGlite without DATABASE_URL)
//
// "hot state" is the node's RSS after filling minus its RSS just before (same process): that is what
// the keys cost; keys per GB is 2^30 bytes over that cost per key.
import { spawn } from 'bun'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDatabaseOn } from '../support/harness'
import { ADMIN_TOKEN } from './fixture'
import { median } from './stats'

const KEYS = Number(process.env.BENCH_KEYS ?? 1_000_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1)
const DEVICES = Number(process.env.BENCH_DEVICES ?? 1)
const LAYOUTS = ['packed', 'map'] as const

interface Figure {
  layout: string
  keys: number
  rss: number
  before: number
  heap: number
  fillMs: number
  valid: boolean
}

const db = process.env.DATABASE_URL ? await createDatabaseOn(process.env.DATABASE_URL, 'keyward_bench') : null
const dataDir = mkdtempSync(join(tmpdir(), 'keyward-bench-memory-'))
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`
try {
  console.log(`Resident memory of a node holding ${KEYS.toLocaleString('en')} keys (${DEVICES} device(s) each), ${ROUNDS} round(s):`)
  const figures = new Map<string, Figure[]>(LAYOUTS.map((l) => [l, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const layout of round % 2 ? [...LAYOUTS].reverse() : LAYOUTS) {
      const child = spawn(['bun', join(import.meta.dir, 'validate.ts'), 'memory'], {
        env: {
          ...process.env,
          BENCH_LAYOUT: layout,
          BENCH_KEYS: String(KEYS),
          BENCH_DB: db?.url ?? '',
          SECRET_KEY: 'ab'.repeat(32),
          ADMIN_TOKEN,
          DATA_DIR: dataDir,
        },
        stdout: 'pipe',
        stderr: 'inherit',
      })
      const out = await new Response(child.stdout).text()
      await child.exited
      for (const line of out.split('\n')) {
        if (line.startsWith('MEMORY ')) figures.get(layout)!.push(JSON.parse(line.slice(7)))
        else if (line.trim()) console.log(line)
      }
    }
  }
  const perKey = (f: Figure) => (f.rss - f.before) / f.keys
  const [packed, map] = LAYOUTS.map((l) => figures.get(l)!)
  if (packed.length === 0 || map.length === 0) throw new Error('a layout printed no figure')
  console.log('\nMedians:')
  for (const [name, fs] of [['packed (now)', packed], ['map (before)', map]] as const) {
    const b = median(fs.map(perKey))
    console.log(`  ${name.padEnd(13)} node RSS ${mb(median(fs.map((f) => f.rss)))}, hot state ${Math.round(b)} B/key, ` +
      `${(2 ** 30 / b / 1e6).toFixed(2)} M keys per GB of hot state; node before filling ${mb(median(fs.map((f) => f.before)))}`)
  }
  const ratio = median(packed.map((f, i) => perKey(f) / perKey(map[i] ?? map[0])))
  const rssRatio = median(packed.map((f, i) => f.rss / (map[i] ?? map[0]).rss))
  console.log(`  packed / map: ${ratio.toFixed(2)}x the bytes per key, ${rssRatio.toFixed(2)}x the node's RSS   (target: node RSS <= 250 MB, <= 180 B/key)`)
} finally {
  rmSync(dataDir, { recursive: true, force: true })
  await db?.drop()
}

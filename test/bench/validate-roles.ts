// The processes the validate benchmark starts besides the node itself (see validate.ts):
//   map             baseline (a): Bun.serve, the same JSON body, the answer from a Map
//   map-contract    reference (a′): (a) plus what the contract obliges of every answer: it reads the
//                   Authorization header and sends X-Request-Id (nothing is checked or generated)
//   strict          the strict minimal endpoint (issue 26): reads Authorization, JSON.parse of the body,
//                   one Map.get by the key string (no hashing), the node's own valid answer as JSON
//                   with X-Request-Id: the least any validate endpoint can do
//   strict-cors     reference (s′): (s) whose answers also carry the two CORS headers the contract puts
//                   on every answer of a client route (Access-Control-Allow-Origin, -Expose-Headers)
//   node-per-query  baseline (b): a Keyward node whose hot key state is bypassed (one query per call)
//   pg              reference: bare Bun.serve answering from one Postgres query per request
//   memory          a node whose hot state is filled with BENCH_KEYS keys (BENCH_DEVICES devices each,
//                   default 1); prints its resident memory
//                   (BENCH_LAYOUT=map: the previous layout, map-hot-state.ts, in place of the packed one)
//   map-signed      (a′), and with a Keyward-Nonce one Ed25519 signature over the answer, as the node
//                   signs (signed-validate.ts: the most signing can keep of the unsigned throughput)
import { generateKeyPairSync, hash, randomBytes } from 'node:crypto'
import { CORS_HEADERS, NONCE_HEADER, requestDigestOf, SIGNATURE_HEADER, signatureOf } from '../../src/http/client-answers'
import { loadConfig } from '../../src/config'
import { hashKeyValue, newId, newKeyValue, normalizeKeyValue } from '../../src/infra/crypto'
import { connectPostgres, startEmbedded, type Db } from '../../src/infra/db'
import { migrate } from '../../src/infra/migrate'
import { startNode } from '../../src/node'
import { keyHashOf } from '../../src/modules/validation/hot/hot-state'
import { NO_ENTITLEMENTS } from '../../src/modules/validation/hot/key-row'
import { loadKeyState } from '../../src/modules/validation/repo'
import { MapHotState } from './map-hot-state'

const env = process.env

export async function startHeavyRoles(role: string) {
  if (role === 'map') return mapBaseline(false)
  if (role === 'map-contract') return mapBaseline(true)
  if (role === 'map-signed') return mapBaseline(true, true)
  if (role === 'strict') return strictBaseline(false)
  if (role === 'strict-cors') return strictBaseline(true)
  if (role === 'pg') return pgBaseline()
  if (role === 'node-per-query') return perQueryNode()
  if (role === 'memory') return memoryFigure()
  throw new Error(`unknown bench role ${role}`)
}

/** The node as `bun run start` runs it (config from the environment), minus the hot key state. */
async function perQueryNode() {
  const node = await startNode(loadConfig())
  const engine = node.deps.validation
  // Every lookup goes to Postgres: the same code path as a cache miss, without the cache.
  engine.hot.get = ((hotKey: string) => loadKeyState(node.deps.sql, keyHashOf(hotKey))) as never
}

type Answer = { valid: boolean; plan: string | null; expires_at: string | null; activations_used: number; activation_limit: number }

/** Baseline (a)'s handler (with `contract`, reference (a′)'s): one key, one device, a Map. */
export function mapHandler(keyValue: string, fingerprint: string, contract = false): (req: Request) => Promise<Response> {
  const hash = hashKeyValue(normalizeKeyValue(keyValue)!)
  const keys = new Map<string, { devices: string[]; answer: Answer }>([
    [hash, { devices: [fingerprint], answer: { valid: true, plan: null, expires_at: null, activations_used: 1, activation_limit: 3 } }],
  ])
  const headers = new Headers({ 'content-type': 'application/json;charset=utf-8' })
  let n = 0
  return async (req) => {
    if (contract && req.headers.get('authorization') === null) return new Response('unauthorized', { status: 401 })
    const body = (await req.json()) as { key: string; device_fingerprint: string }
    const k = keys.get(hashKeyValue(normalizeKeyValue(body.key) ?? ''))
    if (!k || !k.devices.includes(body.device_fingerprint)) return Response.json({ valid: false, reason: 'not_found' })
    if (!contract) return Response.json(k.answer)
    headers.set('x-request-id', `req_${n++}`)
    return Response.json(k.answer, { headers })
  }
}

function mapBaseline(contract: boolean, signing = false) {
  const handler = mapHandler(env.BENCH_KEY!, env.BENCH_FP!, contract)
  let validate = handler
  if (signing) {
    const key = { kid: 'bench', privateKey: generateKeyPairSync('ed25519').privateKey, certificate: null }
    validate = async (req) => {
      const nonce = req.headers.get(NONCE_HEADER)
      if (nonce === null) return handler(req)
      // the node's own signing function, over the request body's digest and the text of the same answer
      const requestDigest = requestDigestOf(await req.clone().bytes())
      const res = await handler(req)
      const text = await res.text()
      const signed = new Response(text, res)
      signed.headers.set(SIGNATURE_HEADER, signatureOf(key, { path: '/v1/validate', nonce, requestDigest }, text))
      return signed
    }
  }
  Bun.serve({
    port: Number(env.BENCH_PORT),
    hostname: '127.0.0.1',
    routes: {
      '/healthz': new Response('ok'),
      '/v1/validate': { POST: validate },
    },
  })
}

/**
 * The strict minimal endpoint's handler: reads Authorization, JSON.parse of the body, one Map.get by the
 * key string as sent (no hashing), and the node's own valid answer (`answer`, its JSON) as JSON with an
 * X-Request-Id.
 */
export function strictHandler(keyValue: string, fingerprint: string, answer: string, cors = false): (req: Request) => Promise<Response> {
  const answers = new Map<string, { devices: string[]; answer: object }>([[keyValue, { devices: [fingerprint], answer: JSON.parse(answer) }]])
  let n = 0
  return async (req) => {
    if (req.headers.get('authorization') === null) return new Response('unauthorized', { status: 401 })
    const body = JSON.parse(await req.text()) as { key: string; device_fingerprint: string }
    const k = answers.get(body.key)
    if (!k || !k.devices.includes(body.device_fingerprint)) return Response.json({ valid: false, reason: 'not_found' })
    return Response.json(k.answer, { headers: cors ? { ...CORS_HEADERS, 'x-request-id': `req_${n++}` } : { 'x-request-id': `req_${n++}` } })
  }
}

function strictBaseline(cors: boolean) {
  Bun.serve({
    port: Number(env.BENCH_PORT),
    hostname: '127.0.0.1',
    routes: {
      '/healthz': new Response('ok'),
      '/v1/validate': { POST: strictHandler(env.BENCH_KEY!, env.BENCH_FP!, env.BENCH_ANSWER!, cors) },
    },
  })
}

async function pgBaseline() {
  // External Postgres: the node's own rows in the bench database. Embedded: a PGlite of its own,
  // seeded with the same key and device (PGlite serves one connection, so this baseline is slower).
  let db: Db
  const hash = env.BENCH_KEY_HASH!
  if (env.BENCH_DB) {
    db = connectPostgres(env.BENCH_DB, 10)
  } else {
    db = await startEmbedded(null)
    await migrate(db.sql)
    const [acct, prod, key] = [newId('acct'), newId('prod'), newId('key')]
    await db.sql`insert into accounts (id, name, plan) values (${acct}, 'bench', 'enterprise')`
    await db.sql`insert into products (id, account_id, name, slug) values (${prod}, ${acct}, 'bench', 'bench')`
    await db.sql`insert into license_keys (id, account_id, product_id, key_hash, key_prefix, activation_limit)
      values (${key}, ${acct}, ${prod}, ${hash}, 'XXXXX', 3)`
    await db.sql`insert into activations (id, account_id, key_id, product_id, device_fingerprint)
      values (${newId('act')}, ${acct}, ${key}, ${prod}, ${env.BENCH_FP!})`
  }
  const { sql } = db
  const bearer = `Bearer ${env.BENCH_TOKEN}`
  Bun.serve({
    port: Number(env.BENCH_PORT),
    hostname: '127.0.0.1',
    routes: {
      '/healthz': new Response('ok'),
      '/v1/validate': {
        async POST(req) {
          if (req.headers.get('authorization') !== bearer) return new Response('unauthorized', { status: 401 })
          const body = (await req.json()) as { key: string; device_fingerprint: string }
          const keyHash = hashKeyValue(normalizeKeyValue(body.key) ?? '')
          const [k] = await sql<{ status: string; expires_at: Date | null; plan: string | null; activation_limit: number; used: number; known: boolean }[]>`
            select k.status, k.expires_at, k.plan, k.activation_limit,
              (select count(*)::int from activations a where a.key_id = k.id and a.status = 'active') as used,
              exists(select 1 from activations a where a.key_id = k.id and a.status = 'active'
                     and a.device_fingerprint = ${body.device_fingerprint.toLowerCase()}) as known
            from license_keys k where k.key_hash = ${keyHash}`
          if (!k) return Response.json({ valid: false, reason: 'not_found' })
          if (k.status !== 'active') return Response.json({ valid: false, reason: k.status })
          if (!k.known) return Response.json({ valid: false, reason: 'activation_limit' })
          return Response.json({ valid: true, plan: k.plan, expires_at: k.expires_at, activations_used: k.used, activation_limit: k.activation_limit })
        },
      },
    },
  })
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`

async function memoryFigure() {
  const n = Number(env.BENCH_KEYS ?? 1_000_000)
  const devicesPerKey = Number(env.BENCH_DEVICES ?? 1)
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    DEMO_ACCOUNT: 'false',
    ADMIN_TOKEN: env.ADMIN_TOKEN,
    SECRET_KEY: env.SECRET_KEY,
    DATA_DIR: env.DATA_DIR,
    DATABASE_URL: env.BENCH_DB || undefined,
    CACHE_MAX_KEYS: String(Math.max(n, 1_000_000)), // the default, or room for every key filled
  })
  const node = await startNode(config)
  const engine = node.deps.validation
  const layout = env.BENCH_LAYOUT === 'map' ? 'map' : 'packed'
  if (layout === 'map') {
    engine.hot.close()
    const opts = { ttlMs: config.cacheTtlMs, degradedTtlMs: config.degradedTtlMs, maxKeys: config.cacheMaxKeys, maxUnknownKeys: config.cacheMaxUnknownKeys }
    ;(engine as { hot: unknown }).hot = new MapHotState((hotKey) => loadKeyState(node.deps.sql, keyHashOf(hotKey)), opts, node.deps.bus)
  }
  const hot = engine.hot
  Bun.gc(true)
  await Bun.sleep(200)
  const before = process.memoryUsage().rss

  // A real account whose first key is validated over HTTP at the end: the filled entries are live.
  const res = await fetch(`${node.url}/admin/accounts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${config.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Memory', plan: 'enterprise' }),
  })
  const { account, api_key } = (await res.json()) as { account: { id: string }; api_key: { token: string } }
  const accounts = [account.id, ...Array.from({ length: 999 }, () => newId('acct'))]
  const products = Array.from({ length: 1000 }, () => newId('prod'))
  const probeKey = newKeyValue()
  const probeFp = randomBytes(32).toString('hex')
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    // fresh strings per key, as rows read from Postgres would be
    const hotKey = i === 0 ? hashKeyValue(normalizeKeyValue(probeKey)!, 'base64') : hash('sha256', `bench-${i}-${Math.random()}`, 'base64')
    hot.put(hotKey, {
      accountId: `${accounts[i % accounts.length]}`,
      productId: `${products[i % products.length]}`,
      status: 'active',
      plan: i % 2 ? 'pro' : null,
      expiresAt: i % 3 ? Date.now() + 86_400_000 * 365 : null,
      limit: 3,
      devices: Array.from({ length: devicesPerKey }, (_, d) => (i === 0 && d === 0 ? probeFp : randomBytes(32).toString('hex'))),
      entitlements: NO_ENTITLEMENTS,
      graceMs: 0,
      keep: false,
      policyId: null,
      own: null,
      oneKeyPerDevice: false,
      metered: false,
      relaySeats: 0,
    }, Date.now() + 3_600_000) // loaded "in the future": nothing expires while we measure
  }
  const fillMs = performance.now() - t0
  Bun.gc(true)
  await Bun.sleep(500)
  Bun.gc(true)
  const after = process.memoryUsage()
  const probe = await fetch(`${node.url}/v1/validate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${api_key.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ key: probeKey, device_fingerprint: probeFp }),
  })
  const answer = (await probe.json()) as { valid: boolean }
  const bytes = (after.rss - before) / n
  console.log(
    `  ${layout.padEnd(6)} ${hot.size.toLocaleString('en')} keys: RSS ${mb(after.rss)} (node before filling: ${mb(before)}; ` +
      `hot state ≈ ${mb(after.rss - before)}, ${Math.round(bytes)} B/key, ${((2 ** 30 / bytes) / 1e6).toFixed(1)} M keys per GB; ` +
      `JS heap ${mb(after.heapUsed)}); filled in ${(fillMs / 1000).toFixed(1)} s; a filled key validates from memory: ${answer.valid}`,
  )
  console.log(`MEMORY ${JSON.stringify({ layout, keys: hot.size, rss: after.rss, before, heap: after.heapUsed, fillMs, valid: answer.valid })}`)
  await node.stop()
  process.exit(0)
}

// Secrets at rest and in logs: a dump of every table holds no API token, license key value or webhook
// secret in plain text (in any spelling), and no log line holds one either.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import pino from 'pino'
import { open } from '../../src/infra/crypto'
import { startNode, type Node } from '../../src/node'
import { ADMIN_TOKEN, client, newProduct, testConfig, useHarness, type Client } from '../support/harness'

setDefaultTimeout(60_000)

let node: Node
let call: Client
const logLines: string[] = []
afterAll(() => node?.stop()) // registered before the harness: this node stops before the database goes
const h = useHarness({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } })
beforeAll(async () => {
  // A second node on the same database whose logger keeps every line, at the most verbose level.
  const log = pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) })
  node = await startNode(testConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'trace' }, h.db.url), {
    db: h.db.url ? undefined : await h.db.open(),
    log,
  })
  call = client(node.url)
}, 60_000)

/** Every row of every table in the schema, as text. */
async function dumpDatabase(): Promise<string> {
  const sql = h.node.deps.sql
  const tables = await sql<{ name: string }[]>`select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE'`
  expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['accounts', 'api_keys', 'license_keys', 'idempotency_keys', 'events']))
  let dump = ''
  for (const { name } of tables) {
    const rows = await sql`select row_to_json(t)::text as row from ${sql(name)} t`
    for (const r of rows) dump += `${name}: ${r.row}\n`
  }
  return dump
}

/** The spellings in which a secret could leak. */
function spellings(secret: string): string[] {
  const out = [secret]
  if (secret.startsWith('kw_')) out.push(secret.slice(3))
  if (/^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}$/.test(secret)) {
    const bare = secret.replaceAll('-', '')
    out.push(bare, bare.toLowerCase(), secret.toLowerCase())
  }
  if (secret.startsWith('whsec_')) {
    const raw = Buffer.from(secret.slice(6), 'base64')
    out.push(secret.slice(6), raw.toString('hex'), raw.toString('base64url'))
  }
  return out
}

function expectAbsent(haystack: string, secrets: string[], where: string) {
  for (const secret of secrets) {
    for (const s of spellings(secret)) {
      if (haystack.includes(s)) throw new Error(`${where} contains a secret in plain text: ${s.slice(0, 6)}…`)
    }
  }
}

const secrets: string[] = []

describe('no plaintext secret in the database', () => {
  test('API tokens (created, rotated, operator-issued) and license key values, also via Idempotency-Key', async () => {
    const created = await call('POST', '/admin/accounts', { token: ADMIN_TOKEN, body: { name: 'Secretive', plan: 'growth' } })
    const token = created.body.api_key.token
    secrets.push(token)
    for (const [i, scope] of ['validate', 'keys:read', 'full_access'].entries()) {
      const k = await call('POST', '/v1/api-keys', { token, body: { name: scope, scope }, headers: { 'idempotency-key': `ak-${i}` } })
      expect(k.status).toBe(201)
      secrets.push(k.body.token)
      const rotated = await call('POST', `/v1/api-keys/${k.body.id}/rotate`, { token })
      secrets.push(rotated.body.token)
    }
    const product = await newProduct(call, token)
    for (let i = 0; i < 5; i++) {
      const key = await call('POST', '/v1/keys', { token, body: { product_id: product.id, metadata: { n: i } }, headers: { 'idempotency-key': `key-${i}` } })
      expect(key.status).toBe(201)
      secrets.push(key.body.key_value)
      // the replay answers with the same secret, so it was kept somewhere: not in plain text
      const replay = await call('POST', '/v1/keys', { token, body: { product_id: product.id, metadata: { n: i } }, headers: { 'idempotency-key': `key-${i}` } })
      expect(replay.body.key_value).toBe(key.body.key_value)
    }
    // a validate call carries the key value in its body
    await call('POST', '/v1/validate', { token, body: { key: secrets.at(-1), device_fingerprint: 'ab'.repeat(32) } })
    await node.deps.principals.flush()
    expectAbsent(await dumpDatabase(), secrets, 'the database')
  })

  test('webhook signing secrets', async () => {
    const { token } = await h.account('growth')
    for (let i = 0; i < 2; i++) {
      const res = await call('POST', '/v1/webhooks', {
        token,
        body: { url: 'http://127.0.0.1:9/hook', events: ['account.plan_changed'] },
        headers: { 'idempotency-key': `wh-${i}` },
      })
      expect(res.status).toBe(201)
      expect(res.body.secret).toMatch(/^whsec_/)
      secrets.push(res.body.secret)
    }
    expectAbsent(await dumpDatabase(), secrets, 'the database')
  })

  test('payment connector signing secrets, also through the hook (signed and refused)', async () => {
    const { token } = await h.account('growth')
    const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString('base64')}`
    const created = await call('POST', '/v1/connectors', { token, body: { provider: 'lemonsqueezy', name: 'Shop', signing_secret: secret } })
    expect(created.status).toBe(201)
    secrets.push(secret)
    const payload = JSON.stringify({ meta: { event_name: 'order_created' }, data: { type: 'orders', id: '1', attributes: { status: 'pending' } } })
    const signature = createHmac('sha256', secret).update(payload).digest('hex')
    const accepted = await call('POST', created.body.endpoint_path, { raw: payload, headers: { 'x-signature': signature } })
    expect(accepted.body.outcome).toBe('ignored')
    const refused = await call('POST', created.body.endpoint_path, { raw: payload, headers: { 'x-signature': 'ab'.repeat(32) } })
    expect(refused.status).toBe(400)
    expectAbsent(await dumpDatabase(), secrets, 'the database')
  })

  test('offline signing private keys are sealed: the root and the signing keys', async () => {
    const { id, token } = await h.account('growth')
    expect((await call('GET', '/v1/offline/public-key', { token })).status).toBe(200)
    const created = await call('POST', '/v1/signing-keys', { token, body: {} })
    expect(created.status).toBe(201)
    expect((await call('POST', `/v1/signing-keys/${created.body.kid}/activate`, { token })).status).toBe(200)
    const [root] = await h.node.deps.sql`select private_key_sealed from signing_keys where account_id = ${id}`
    const [signer] = await h.node.deps.sql`select private_key_sealed from signers where kid = ${created.body.kid}`
    expect(root).toBeDefined()
    expect(signer).toBeDefined()
    const dump = await dumpDatabase()
    for (const row of [root!, signer!]) {
      const der = open(node.deps.secretKey, row.private_key_sealed)
      for (const s of [der.toString('base64'), der.toString('hex'), der.subarray(-32).toString('hex'), der.subarray(-32).toString('base64')]) {
        expect(dump.includes(s)).toBe(false)
      }
      secrets.push(der.subarray(-32).toString('base64'), der.subarray(-32).toString('hex'))
    }
  })
})

describe('no secret in the logs', () => {
  test('nothing logged while secrets were created, used, replayed and refused holds one', async () => {
    expect(secrets.length).toBeGreaterThan(10)
    const { token } = await h.account()
    // refusals that echo nothing sensitive back into logs either
    await call('POST', '/v1/products', { token, raw: `{"name": "${secrets[1]}", "slug": 5}` })
    await call('GET', '/v1/products', { headers: { authorization: `Bearer ${secrets[2]}x` } })
    expect(logLines.length).toBeGreaterThan(20)
    expectAbsent(logLines.join('\n'), [...secrets, token], 'the log')
  })
})

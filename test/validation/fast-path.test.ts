// The validate fast path's shortcuts keep the behaviour they replace: a remembered Authorization
// header stops working when its API key is rotated or deleted; Bun's lossy body decoding never
// lets invalid UTF-8 through as data; every request still gets one access-log line, flushed at stop.
import { expect, test } from 'bun:test'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { startNode } from '../../src/node'
import { freshDatabase, useHarness, testConfig } from '../support/harness'

const h = useHarness()

async function knownDevice(token: string) {
  const product = await h.call('POST', '/v1/products', { token, body: { name: 'P', slug: `p-${crypto.randomUUID().slice(0, 8)}` } })
  const key = await h.call('POST', '/v1/keys', { token, body: { product_id: product.body.id, activation_limit: 2 } })
  return { key: key.body.key_value as string, device_fingerprint: 'ab'.repeat(32) }
}

test('a rotated or deleted API key is refused even after its header was remembered', async () => {
  const { token } = await h.account()
  const body = await knownDevice(token)
  for (const how of ['rotate', 'delete'] as const) {
    const created = await h.call('POST', '/v1/api-keys', { token, body: { name: how, scope: 'validate' } })
    const scoped: string = created.body.token
    for (let i = 0; i < 3; i++) expect((await h.call('POST', '/v1/validate', { token: scoped, body })).status).toBe(200)
    if (how === 'rotate') expect((await h.call('POST', `/v1/api-keys/${created.body.id}/rotate`, { token })).status).toBe(200)
    else expect((await h.call('DELETE', `/v1/api-keys/${created.body.id}`, { token })).status).toBe(204)
    expect((await h.call('POST', '/v1/validate', { token: scoped, body })).status).toBe(401)
  }
})

test('invalid UTF-8 in a validate body is a refusal or a 400, never stored or a 500', async () => {
  const { token } = await h.account()
  const { key, device_fingerprint } = await knownDevice(token)
  const send = (json: string, bad: number[]) => {
    const [before, after] = json.split('@')
    const bytes = new Uint8Array([...new TextEncoder().encode(before), ...bad, ...new TextEncoder().encode(after)])
    return fetch(`${h.node.url}/v1/validate`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: bytes })
  }
  const inVersion = await send(JSON.stringify({ key, device_fingerprint, app_version: '1.@' }), [0xe9, 0xff])
  expect(inVersion.status).toBe(400)
  expect(((await inVersion.json()) as { errors: { field: string }[] }).errors[0].field).toBe('body.app_version')
  const inKey = await send(JSON.stringify({ key: `${key}@`, device_fingerprint }), [0xff])
  expect(await inKey.json()).toEqual({ valid: false, reason: 'not_found' })
  expect((await send(JSON.stringify({ key, device_fingerprint: `${device_fingerprint.slice(1)}@` }), [0xff])).status).toBe(400)
})

test('one access-log line per validate request, all written by a clean stop', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'keyward-log-')), 'node.log')
  const log = pino({ level: 'info', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ dest: file, sync: false }))
  const db = await freshDatabase()
  const node = await startNode(testConfig({ LOG_LEVEL: 'info' }, db.url), { db: db.url ? undefined : await db.open(), log })
  try {
    const account = await fetch(`${node.url}/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.config.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Log', plan: 'growth' }),
    })
    const { api_key } = (await account.json()) as { api_key: { token: string } }
    const ids: string[] = []
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${node.url}/v1/validate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${api_key.token}`, 'content-type': 'application/json', ...(i % 2 ? { 'x-request-id': `mine-${i}` } : {}) },
        body: JSON.stringify({ key: 'NOPE', device_fingerprint: 'ab'.repeat(32) }),
      })
      expect(res.status).toBe(200)
      ids.push(res.headers.get('x-request-id')!)
    }
    expect(ids.filter((id) => /^req_[0-9A-HJKMNP-TV-Z]{26}$/.test(id))).toHaveLength(150)
    await node.stop()
    let lines: Record<string, unknown>[] = []
    for (let i = 0; i < 50 && lines.length < ids.length; i++) {
      await Bun.sleep(20) // pino's own buffer is written asynchronously after stop
      lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.includes('"/v1/validate"')).map((l) => JSON.parse(l))
    }
    expect(lines.map((l) => l.request_id)).toEqual(ids)
    expect(Object.keys(lines[0])).toEqual(['level', 'time', 'pid', 'method', 'route', 'status', 'ms', 'request_id'])
    expect(lines[0]).toMatchObject({ level: 30, method: 'POST', route: '/v1/validate', status: 200 })
  } finally {
    await node.stop()
    await db.drop()
  }
}, 60_000)

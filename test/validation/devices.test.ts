// Device self-service for the key's holder: device_name on validate (stored, replaced, kept, refused
// when malformed on both doors) and POST /v1/devices (shape, order, 404s, outside the daily quota).
import { expect, setDefaultTimeout, test } from 'bun:test'
import { appClient, scopedToken, useHarness } from '../support/harness'
import { activationRows, fingerprint, setup, validate } from './support'

setDefaultTimeout(60_000)
const h = useHarness()

const storedNames = async (keyId: string): Promise<{ device_fingerprint: string; device_name: string | null }[]> => [
  ...(await h.node.deps.sql<{ device_fingerprint: string; device_name: string | null }[]>`select device_fingerprint, device_name
    from activations where key_id = ${keyId} and status = 'active' order by activated_at, id`),
]

const devices = (token: string, body: Record<string, unknown>) => h.call('POST', '/v1/devices', { token, body })

test('device_name is stored on activation, replaced by a different one, kept when omitted', async () => {
  const { token, key } = await setup(h, { activation_limit: 3 })
  const [a, b] = [fingerprint(), fingerprint()]
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a, device_name: "Alice's MacBook" })).body.valid).toBe(true)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: b })).body.valid).toBe(true)
  expect(await storedNames(key.id)).toEqual([
    { device_fingerprint: a, device_name: "Alice's MacBook" },
    { device_fingerprint: b, device_name: null },
  ])
  // the admin's activation objects carry it too
  const detail = await h.call('GET', `/v1/keys/${key.id}`, { token })
  expect(detail.body.activations.map((x: any) => x.device_name)).toEqual(["Alice's MacBook", null])

  // a different name on a repeat validate: shown at once by this node, in Postgres after the batched write
  const renamed = 'Bürocomputer 🖥️ «zwei»'
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a.toUpperCase(), device_name: renamed })).body.valid).toBe(true)
  expect((await devices(token, { key: key.key_value })).body.devices[0].device_name).toBe(renamed)
  await h.node.deps.validation.flush()
  expect((await storedNames(key.id))[0].device_name).toBe(renamed)

  // omitted (and app_version alone) keeps the stored name; a name for a device without one sets it
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: a, app_version: '2.0' })).body.valid).toBe(true)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: b, device_name: 'B' })).body.valid).toBe(true)
  await h.node.deps.validation.flush()
  expect(await storedNames(key.id)).toEqual([
    { device_fingerprint: a, device_name: renamed },
    { device_fingerprint: b, device_name: 'B' },
  ])
  const listed = (await devices(token, { key: key.key_value })).body.devices
  expect(listed.map((d: any) => [d.device_name, d.app_version])).toEqual([
    [renamed, '2.0'],
    ['B', null],
  ])
})

test('a device that takes a new activation keeps the name it sent then, not one left from before', async () => {
  const { token, key } = await setup(h, { activation_limit: 1 })
  const a = fingerprint()
  const body = { key: key.key_value, device_fingerprint: a }
  await validate(h.call, token, { ...body, device_name: 'first' })
  await validate(h.call, token, { ...body, device_name: 'old' }) // waits in the batched write
  expect((await h.call('POST', '/v1/deactivate', { token, body })).body.deactivated).toBe(true)
  expect((await validate(h.call, token, { ...body, device_name: 'new' })).body).toMatchObject({ valid: true, activations_used: 1 })
  await h.node.deps.validation.flush()
  expect(await storedNames(key.id)).toEqual([{ device_fingerprint: a, device_name: 'new' }])
})

test('malformed device names are 400 on both doors and change nothing', async () => {
  const { token, key } = await setup(h, { activation_limit: 5 })
  const held = fingerprint()
  await validate(h.call, token, { key: key.key_value, device_fingerprint: held, device_name: 'kept' })
  const bad: unknown[] = [
    '',
    'a'.repeat(101),
    '😀'.repeat(101),
    'tab\there',
    'line\nbreak',
    'nul\u0000',
    'del\u007f',
    'c1\u0085',
    'c1\u009f',
    'lone \ud800 surrogate',
    42,
    null,
  ]
  const doors = [h.call, appClient(h.node)]
  for (const call of doors) {
    for (const device_name of bad) {
      for (const device of [held, fingerprint()]) {
        const res = await validate(call, token, { key: key.key_value, device_fingerprint: device, device_name })
        expect(res.status).toBe(400)
        expect(res.body.code).toBe('invalid_request')
        expect(res.body.errors.some((e: any) => e.field.includes('device_name'))).toBe(true)
      }
    }
    // the edges that are fine: 100 code points (200 UTF-16 units), no-break space, non-Latin scripts
    for (const device_name of ['a'.repeat(100), '😀'.repeat(100), '\u00a0x', 'ノートパソコン']) {
      const res = await validate(call, token, { key: key.key_value, device_fingerprint: held, device_name })
      expect(res.status).toBe(200)
    }
  }
  await h.node.deps.validation.flush()
  const rows = await activationRows(h.node.deps.sql, key.id)
  expect(rows).toHaveLength(1) // no refused call took a slot
  expect((await storedNames(key.id))[0].device_name).toBe('ノートパソコン')
})

test('POST /v1/devices lists the active devices oldest first, with the key counters', async () => {
  const { token, key, product } = await setup(h, { activation_limit: 4 })
  const fps = [fingerprint(), fingerprint(), fingerprint()]
  for (const [i, fp] of fps.entries()) {
    const res = await validate(h.call, token, { key: key.key_value, device_fingerprint: fp, device_name: `device ${i}`, app_version: `1.${i}` }, { 'cf-ipcountry': 'de' })
    expect(res.body.valid).toBe(true)
    await Bun.sleep(5) // distinct activation times
  }
  expect((await h.call('POST', '/v1/deactivate', { token, body: { key: key.key_value, device_fingerprint: fps[1] } })).body.deactivated).toBe(true)
  await h.node.deps.sql`update license_keys set deactivations_allowed = 3 where id = ${key.id}`

  const validateOnly = await scopedToken(h.call, token, 'validate')
  const res = await devices(validateOnly, { key: key.key_value.toLowerCase(), product_id: product.id })
  expect(res.status).toBe(200)
  expect(res.body).toMatchObject({ status: 'active', activation_limit: 4, activations_used: 2, deactivations_allowed: 3, deactivations_used: 1 })
  expect(res.body.devices).toHaveLength(2)
  expect(res.body.devices.map((d: any) => d.device_fingerprint)).toEqual([fps[0], fps[2]])
  for (const d of res.body.devices) {
    expect(Object.keys(d).sort()).toEqual([
      'activated_at', 'app_version', 'components', 'components_changed_at', 'country', 'device_fingerprint', 'device_name', 'last_validated_at', 'replaced_fingerprints',
    ])
    expect(Date.parse(d.activated_at)).toBeGreaterThan(0)
    expect(Date.parse(d.last_validated_at)).toBeGreaterThanOrEqual(Date.parse(d.activated_at))
  }
  expect(res.body.devices[0]).toMatchObject({ device_name: 'device 0', app_version: '1.0' })
  expect(res.body.devices[1]).toMatchObject({ device_name: 'device 2', app_version: '1.2' })
  expect(Object.keys(res.body).sort()).toEqual(['activation_limit', 'activations_used', 'deactivations_allowed', 'deactivations_used', 'devices', 'status'])

  // a revoked key still lists its devices, with its status
  expect((await h.call('POST', `/v1/keys/${key.id}/revoke`, { token, body: {} })).status).toBe(200)
  const revoked = await devices(token, { key: key.key_value })
  expect(revoked.body).toMatchObject({ status: 'revoked', deactivations_allowed: 3 })
  expect(revoked.body.devices).toHaveLength(2)

  // an expired key (past expires_at, before the sweeper ran) says so; an uncapped key says null
  const other = await setup(h)
  await validate(h.call, other.token, { key: other.key.key_value, device_fingerprint: fingerprint() })
  await h.node.deps.sql`update license_keys set expires_at = now() - interval '1 minute' where id = ${other.key.id}`
  expect((await devices(other.token, { key: other.key.key_value })).body).toMatchObject({
    status: 'expired',
    activations_used: 1,
    deactivations_allowed: null,
    deactivations_used: 0,
  })
})

test('POST /v1/devices: 404 for what is not this account key or product; 400/403 as everywhere', async () => {
  const { token, key, product } = await setup(h)
  const other = await setup(h)
  for (const [t, body] of [
    [token, { key: 'ABCDE-FGHJK-MNPQR-STVWX-YZ012' }],
    [token, { key: 'nonsense' }],
    [token, { key: key.key_value, product_id: other.product.id }],
    [token, { key: key.key_value, product_id: 'prd_nope' }],
    [other.token, { key: key.key_value }],
    [other.token, { key: key.key_value, product_id: product.id }],
  ] as const) {
    const res = await devices(t, body)
    expect(res.status).toBe(404)
    expect(res.body.code).toBe('not_found')
    expect(JSON.stringify(res.body)).not.toContain(key.key_value)
  }
  expect((await devices(token, { key: key.key_value, product_id: null })).status).toBe(200)
  expect((await devices(token, {})).status).toBe(400)
  expect((await devices(token, { key: '' })).status).toBe(400)
  expect((await h.call('POST', '/v1/devices', { body: { key: key.key_value } })).status).toBe(401)
  const reader = await scopedToken(h.call, token, 'keys:read')
  expect((await devices(reader, { key: key.key_value })).status).toBe(403)
})

test('POST /v1/devices is neither counted toward nor refused by the daily quota', async () => {
  const { accountId, token, key } = await setup(h, {}, 'free')
  const fp = fingerprint()
  await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })
  for (let i = 0; i < 10; i++) expect((await devices(token, { key: key.key_value })).status).toBe(200)
  expect(await h.node.deps.counters.today(accountId)).toBe(1)
  // use up the Free plan's 500 calls: validate is refused, the devices list is not
  for (let i = 1; i < 500; i++) expect(await h.node.deps.counters.take(accountId, 500)).toBe(true)
  expect((await validate(h.call, token, { key: key.key_value, device_fingerprint: fp })).status).toBe(429)
  const res = await devices(token, { key: key.key_value })
  expect(res.status).toBe(200)
  expect(res.body.devices.map((d: any) => d.device_fingerprint)).toEqual([fp])
  expect(await h.node.deps.counters.today(accountId)).toBe(500)
})

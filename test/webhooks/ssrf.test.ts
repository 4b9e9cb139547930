// SSRF protection with the default WEBHOOK_ALLOW_PRIVATE_URLS=false: refused at creation (400) and at
// delivery (a failed attempt; the receiver never hears from us).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { HostAddresses, isPublicAddress, resolveTarget } from '../../src/modules/webhooks/ssrf'
import { newProduct, useHarness } from '../support/harness'
import { eventually, startReceiver, type Receiver } from './receiver'

const h = useHarness({ env: { WEBHOOK_RETRY_DELAYS_MS: '60000', WEBHOOK_TIMEOUT_MS: '3000' }, socket: false })
let rx: Receiver
beforeAll(() => {
  rx = startReceiver()
})
afterAll(() => rx.stop()) // after the node has stopped (hooks run in the order they were registered)

const PRIVATE_URLS = [
  'http://127.0.0.1/',
  'http://127.8.9.10:8080/hook',
  'http://localhost/',
  'http://LOCALHOST:3000/',
  'http://10.0.0.5/',
  'http://172.16.3.4/',
  'http://192.168.1.1/',
  'http://100.64.0.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://0.0.0.0/',
  'http://2130706433/', // 127.0.0.1 as one decimal number
  'http://0x7f.1/', // 127.0.0.1 in hex shorthand
  'http://224.0.0.1/',
  'http://255.255.255.255/',
  'http://[::1]/',
  'http://[::]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:a00:1]/',
  'http://[fd12:3456::1]/',
  'http://[fe80::1]/',
  'http://[ff02::1]/',
  'https://127.0.0.1:8443/',
  // IPv6 forms that carry an IPv4 address (see ssrf.ts for the decision on each)
  'http://[::127.0.0.1]/', // IPv4-compatible
  'http://[::7f00:1]:8080/',
  'http://[::8.8.8.8]/', // IPv4-compatible is deprecated: refused whatever it embeds
  'http://[::ffff:0:127.0.0.1]/', // IPv4-translated
  'http://[::ffff:0:8.8.8.8]/', // IPv4-translated: refused whatever it embeds
  'http://[0:0:0:0:0:ffff:169.254.169.254]/', // IPv4-mapped, long form
  'http://[::ffff:c0a8:101]/', // IPv4-mapped 192.168.1.1 in hex
  'http://[64:ff9b::127.0.0.1]/', // NAT64 well-known prefix
  'http://[64:ff9b::a9fe:a9fe]/', // NAT64 to 169.254.169.254
  'http://[64:ff9b:1::808:808]/', // NAT64 local-use prefix: refused whatever it embeds
  'http://[2002:7f00:1::1]/', // 6to4 of 127.0.0.1
  'http://[2002:808:808::1]/', // 6to4: refused whatever it embeds
  'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/', // Teredo, client 127.0.0.1 (obfuscated)
  'http://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/', // Teredo, client 8.8.8.8: refused whatever it embeds
]

test('creation refuses targets that are loopback, private, link-local, multicast or reserved', async () => {
  const { token } = await h.account('growth')
  for (const url of PRIVATE_URLS) {
    const res = await h.call('POST', '/v1/webhooks', { token, body: { url, events: ['key.created'] } })
    expect(res.status, url).toBe(400)
    expect(res.body.code).toBe('invalid_request')
    expect(res.body.errors).toEqual([{ field: 'body.url', message: expect.stringContaining('address') }])
  }
  for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'data:text/plain,hi', 'ws://example.com/']) {
    const res = await h.call('POST', '/v1/webhooks', { token, body: { url, events: ['key.created'] } })
    expect(res.status, url).toBe(400)
    expect(res.body.errors[0].message).toContain('http')
  }
  expect((await h.call('GET', '/v1/webhooks', { token })).body.data).toEqual([])
})

test('a public IP literal is accepted; patching it to a private target is refused', async () => {
  const { token } = await h.account('growth')
  const created = await h.call('POST', '/v1/webhooks', { token, body: { url: 'https://93.184.215.14/hook', events: ['key.created'] } })
  expect(created.status).toBe(201)
  const patched = await h.call('PATCH', `/v1/webhooks/${created.body.id}`, { token, body: { url: 'http://localhost:3000/' } })
  expect(patched.status).toBe(400)
  expect(patched.body.errors[0].field).toBe('body.url')
  const still = await h.call('GET', `/v1/webhooks/${created.body.id}`, { token })
  expect(still.body.url).toBe('https://93.184.215.14/hook')
})

test('delivery to a target that became private is a failed attempt, and nothing is sent', async () => {
  const { token } = await h.account('growth')
  const created = await h.call('POST', '/v1/webhooks', { token, body: { url: 'https://93.184.215.14/hook', events: ['product.created'] } })
  expect(created.status).toBe(201)
  // As if its DNS now answered with a loopback address (rebinding): point it at the local receiver.
  rx.expect('/ssrf', created.body.secret)
  await h.node.deps.sql`update webhooks set url = ${rx.url('/ssrf')} where id = ${created.body.id}`

  await newProduct(h.call, token)
  const detail = await eventually(async () => {
    const d = await h.call('GET', `/v1/webhooks/${created.body.id}`, { token })
    return d.body.deliveries.length ? d.body : null
  }, 10_000, 'the refused attempt')
  expect(detail.deliveries[0]).toMatchObject({ attempt: 1, status_code: null, success: false, event_type: 'product.created' })
  expect(detail.deliveries[0].error).toMatch(/^refused: url must not point to a loopback/)

  const test = await h.call('POST', `/v1/webhooks/${created.body.id}/test`, { token })
  expect(test.status).toBe(200)
  expect(test.body.delivery).toMatchObject({ success: false, status_code: null })
  expect(test.body.delivery.error).toMatch(/^refused/)
  expect(rx.on('/ssrf')).toHaveLength(0)
})

test('delivery refuses IPv6 forms that embed a refused IPv4 address, and nothing is sent', async () => {
  const { token } = await h.account('growth')
  const created = await h.call('POST', '/v1/webhooks', { token, body: { url: 'https://93.184.215.14/hook', events: ['product.created'] } })
  expect(created.status).toBe(201)
  rx.expect('/ssrf6', created.body.secret)
  for (const host of ['[::127.0.0.1]', '[::ffff:0:127.0.0.1]', '[::ffff:127.0.0.1]', '[64:ff9b::127.0.0.1]', '[2002:7f00:1::1]']) {
    const url = `http://${host}:${rx.port}/ssrf6`
    await h.node.deps.sql`update webhooks set url = ${url} where id = ${created.body.id}`
    const res = await h.call('POST', `/v1/webhooks/${created.body.id}/test`, { token })
    expect(res.status, url).toBe(200)
    expect(res.body.delivery, url).toMatchObject({ success: false, status_code: null })
    expect(res.body.delivery.error, url).toMatch(/^refused: url must not point to a loopback/)
  }
  expect(rx.on('/ssrf6')).toHaveLength(0)
})

describe('address classification', () => {
  test('non-public addresses', () => {
    for (const a of ['127.0.0.1', '10.255.255.255', '172.31.0.1', '192.168.0.1', '169.254.169.254', '100.127.255.255', '0.0.0.0',
      '192.0.2.1', '198.18.0.1', '198.51.100.7', '203.0.113.9', '224.0.0.251', '239.255.255.250', '240.0.0.1', '255.255.255.255',
      '::', '::1', '::ffff:127.0.0.1', '::ffff:10.1.2.3', 'fc00::1', 'fd00::1', 'fe80::1', 'fec0::1', 'ff02::1', '2001:db8::1',
      '64:ff9b::7f00:1', '2002:7f00:1::', '100::1', 'not-an-ip', '',
      // IPv4-compatible ::/96 (deprecated): every one, whatever it embeds
      '::7f00:1', '::127.0.0.1', '::a00:1', '::808:808', '::8.8.8.8', '0:0:0:0:0:0:1.1.1.1',
      // IPv4-mapped ::ffff:0:0/96 in every spelling, embedding a refused address
      '::ffff:7f00:1', '::FFFF:127.0.0.1', '0:0:0:0:0:ffff:7f00:1', '0000:0000:0000:0000:0000:ffff:0a00:0001', '::ffff:0:0',
      '::ffff:a9fe:a9fe', '::ffff:c0a8:1', '::ffff:6440:1', '::ffff:e000:1',
      // IPv4-translated ::ffff:0:0:0/96 (SIIT): every one
      '::ffff:0:7f00:1', '::ffff:0:127.0.0.1', '0:0:0:0:ffff:0:808:808', '::ffff:0:8.8.8.8',
      // NAT64 well-known prefix 64:ff9b::/96 embedding a refused address
      '64:ff9b::127.0.0.1', '64:ff9b::a00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::c0a8:101', '64:ff9b::', '64:ff9b::ffff:ffff',
      // NAT64 local-use 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32: every one
      '64:ff9b:1::808:808', '64:ff9b:1:ffff::1', '2002:808:808::1', '2002:7f00:1::1', '2002:a9fe:a9fe::',
      '2001:0:4136:e378:8000:63bf:80ff:fffe', '2001:0:4136:e378:8000:63bf:f7f7:f7f7', '2001::1',
      // the rest of ::/8 (IETF reserved)
      '::1:ffff:808:808', '::1:0:0:808:808', 'ff:ffff::1', '64:ff9b:2::1',
      // not addresses, or with a zone
      'fe80::1%eth0', '::ffff:127.0.0.1%1', '1:2:3:4:5:6:7:8:9', '::ffff:256.0.0.1', '[::1]', ':::1', '1::2::3']) {
      expect(isPublicAddress(a), a).toBe(false)
    }
  })
  test('public addresses', () => {
    for (const a of ['1.1.1.1', '8.8.8.8', '93.184.215.14', '172.32.0.1', '100.128.0.1', '192.169.0.1', '2606:4700:4700::1111',
      '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8', '::ffff:808:808', '0:0:0:0:0:ffff:101:101',
      // NAT64 well-known prefix: a DNS64 resolver on an IPv6-only network answers these for public hosts
      '64:ff9b::808:808', '64:ff9b::8.8.8.8', '64:ff9b::5db8:d70e',
      // near the refused prefixes, but outside them
      '2003::1', '2001:4860:4860::8888']) {
      expect(isPublicAddress(a), a).toBe(true)
    }
  })
  test('the checked address is the one delivery connects to', async () => {
    const target = await resolveTarget('https://93.184.215.14:8443/a?b=1', false)
    expect(target).toMatchObject({ ok: true, address: '93.184.215.14' })
    expect(await resolveTarget('http://127.0.0.1/', true)).toMatchObject({ ok: true, address: null })
    expect(await resolveTarget('http://127.0.0.1/', false)).toMatchObject({ ok: false })
    const unresolvable = await resolveTarget('http://no-such-host.invalid/', false)
    expect(unresolvable.ok).toBe(false)
    for (const url of ['http://[::127.0.0.1]/', 'http://[::ffff:0:127.0.0.1]/', 'http://[64:ff9b::7f00:1]/', 'http://[2002:7f00:1::]/']) {
      expect(await resolveTarget(url, false), url).toMatchObject({ ok: false, reason: expect.stringContaining('address') })
    }
    expect(await resolveTarget('http://[64:ff9b::808:808]/', false)).toMatchObject({ ok: true, address: '64:ff9b::808:808' })
  })
  test('a host\'s answer is reused for a few seconds, but every attempt checks it again; failures are not kept', async () => {
    let clock = 0
    const answers: Record<string, string[] | Error> = { 'hooks.example.com': ['93.184.215.14'] }
    const asked: string[] = []
    const hosts = new HostAddresses(async (host) => {
      asked.push(host)
      await Bun.sleep(5)
      const a = answers[host]
      if (a instanceof Error) throw a
      return a ?? []
    }, 5_000, () => clock)

    // a burst: concurrent attempts share one lookup, later ones within the time reuse it
    const burst = await Promise.all(Array.from({ length: 20 }, () => resolveTarget('https://hooks.example.com/a', false, hosts)))
    expect(burst.every((t) => t.ok && t.address === '93.184.215.14')).toBe(true)
    clock = 4_999
    expect(await resolveTarget('https://hooks.example.com/b', false, hosts)).toMatchObject({ ok: true, address: '93.184.215.14' })
    expect(asked).toEqual(['hooks.example.com'])

    // past the time it is asked again, and the new answer is judged: rebound to a private address, refused
    answers['hooks.example.com'] = ['10.0.0.7']
    clock = 5_001
    expect(await resolveTarget('https://hooks.example.com/a', false, hosts)).toMatchObject({ ok: false, reason: expect.stringContaining('10.0.0.7') })
    expect(asked).toEqual(['hooks.example.com', 'hooks.example.com'])

    // a failed lookup is not kept: the next attempt asks again
    answers['down.example.com'] = new Error('ENOTFOUND')
    expect(await resolveTarget('https://down.example.com/', false, hosts)).toMatchObject({ ok: false, reason: expect.stringContaining('could not be resolved') })
    answers['down.example.com'] = ['93.184.215.15']
    expect(await resolveTarget('https://down.example.com/', false, hosts)).toMatchObject({ ok: true, address: '93.184.215.15' })
    expect(asked.filter((h) => h === 'down.example.com')).toHaveLength(2)

    // IP literals are never looked up
    expect(await resolveTarget('https://93.184.215.14/', false, hosts)).toMatchObject({ ok: true })
    expect(asked).toHaveLength(4)
  })
})

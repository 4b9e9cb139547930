// Every JSON body is bounded in the work it can cause before any schema runs (docs/decisions.md,
// "Requests"): nested deeper than 32 levels is 400 on every door (Elysia's routes, both reads of the
// validate fast path, an import's NDJSON lines and CSV cells), and a hostile 8 MiB import in flight
// does not hold up validate on the same node. Before this, Elysia's validation error pretty-printed the
// rejected value (indentation growing with depth: quadratic), and a 120 KB body held the loop for seconds.
import { beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { fingerprint, newKey, newProduct, useHarness } from '../support/harness'
import { expectProblem } from '../support/helpers'
import { LICENSE_ALG, parseLicense } from '../../src/modules/offline/license'

setDefaultTimeout(60_000)

const h = useHarness() // a real socket: the validate fast path and Bun's HTTP parser, as clients reach them
let token: string
let productId: string
let keyValue: string
beforeAll(async () => {
  ;({ token } = await h.account('enterprise'))
  productId = (await newProduct(h.call, token)).id
  keyValue = (await newKey(h.call, token, productId)).key_value
})

/** `{"a":{"a":...1...}}`: `depth` objects, the outer one included. */
const nested = (depth: number, inner = '1') => '{"a":'.repeat(depth) + inner + '}'.repeat(depth)
const post = (path: string, raw: string, headers: Record<string, string> = {}) =>
  h.call('POST', path, { token, raw, headers: { 'content-type': 'application/json', ...headers } })

function expectTooDeep(res: { status: number; body: any; headers: Headers }, field = 'body') {
  expectProblem(res, 400, 'invalid_request')
  expect(res.body.errors).toEqual([{ field, message: 'must not nest objects or arrays more than 32 levels deep' }])
}

describe('nesting depth', () => {
  test('33 levels is 400 on every door, before the schema; 32 levels is parsed', async () => {
    for (const path of ['/v1/products', '/v1/keys/import', '/v1/validate', '/v1/deactivate', '/v1/policies']) {
      expectTooDeep(await post(path, nested(33)))
      expectTooDeep(await post(path, `{"x":[${'['.repeat(31)}${']'.repeat(31)}]}`))
    }
    // the validate fast path without a declared length reads the body itself (chunked)
    const chunked = await fetch(`${h.node.url}/v1/validate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: new Blob([nested(40)]).stream(),
    })
    expectTooDeep({ status: chunked.status, body: await chunked.json(), headers: chunked.headers })
    // brackets inside strings are text, not nesting
    const product = await post('/v1/products', JSON.stringify({ name: '['.repeat(100), slug: `s-${Date.now()}` }))
    expect(product.status).toBe(201)
    // 32 levels reaches the schema (unknown fields are dropped)
    const deepest = await post('/v1/validate', JSON.stringify({ key: keyValue, device_fingerprint: fingerprint(), extra: JSON.parse(nested(31)) }))
    expect(deepest.status).toBe(200)
    expect(deepest.body.valid).toBe(true)
  })

  test("a license's JSON, read before its signature is checked, is held to the same depth", () => {
    const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64')
    const license = (payload: string, envelopePad = '') =>
      `-----BEGIN KEYWARD LICENSE-----\n${b64(`{"enc":"${b64(payload)}","sig":"${b64(Buffer.alloc(64))}","alg":"${LICENSE_ALG}","kid":"k"${envelopePad}}`)}\n-----END KEYWARD LICENSE-----`
    expect(parseLicense(license('{"a":1}'))?.payload).toEqual({ a: 1 })
    expect(parseLicense(license(nested(32)))?.payload).toEqual(JSON.parse(nested(32)))
    expect(parseLicense(license(nested(33)))?.payload).toBeNull()
    expect(parseLicense(license('{}', `,"x":${nested(40)}`))).toBeNull()
  })

  test("an import's NDJSON line or CSV JSON cell deeper than 32 levels is a bad row, named by line", async () => {
    const ndjson = [JSON.stringify({ key: 'DEEP-0001', product_id: productId }), `{"key":"DEEP-0002","product_id":"${productId}","metadata":${nested(40)}}`].join('\n')
    const nd = await h.call('POST', '/v1/keys/import', { token, raw: ndjson, headers: { 'content-type': 'application/x-ndjson' } })
    expectProblem(nd, 422, 'import_invalid')
    expect(nd.body.rows).toEqual([{ line: 2, external_id: null, errors: [{ field: 'row', message: 'must not nest objects or arrays more than 32 levels deep' }] }])
    const csv = `key,product_id,metadata\nDEEP-0003,${productId},"${nested(40).replaceAll('"', '""')}"\n`
    const c = await h.call('POST', '/v1/keys/import', { token, raw: csv, headers: { 'content-type': 'text/csv' } })
    expectProblem(c, 422, 'import_invalid')
    expect(c.body.rows).toEqual([{ line: 2, external_id: null, errors: [{ field: 'metadata', message: 'must not nest objects or arrays more than 32 levels deep' }] }])
  })

  test('an NDJSON line or CSV record over 2 MiB is refused without being parsed', async () => {
    const long = `{"key":"LONG-0001","product_id":"${productId}","metadata":{"note":"${'x'.repeat(2 * 1024 * 1024)}"}}`
    const nd = await h.call('POST', '/v1/keys/import', { token, raw: long, headers: { 'content-type': 'application/x-ndjson' } })
    expectProblem(nd, 422, 'import_invalid')
    expect(nd.body.rows[0].errors).toEqual([{ field: 'row', message: 'must be at most 2097152 bytes' }])
    const csv = `key,product_id\nLONG-0002${'y'.repeat(2 * 1024 * 1024)},${productId}\n`
    expectProblem(await h.call('POST', '/v1/keys/import', { token, raw: csv, headers: { 'content-type': 'text/csv' } }), 400, 'invalid_request')
  })

  test('with a hostile 8 MiB import in flight, validate on the same node keeps answering', async () => {
    // 20,000 levels padded to 8 MiB: seconds of one event loop turn before the depth limit
    const depth = 20_000
    const pad = 8 * 1024 * 1024 - nested(depth).length - 64
    const deep = `{"pad":"${'x'.repeat(pad)}","a":${nested(depth)}}`
    // 8 MiB of one flat array, refused by the schema: Elysia's error used to print all of it (over a second)
    const flat = `{"x":[${Array(4_000_000).fill('0').join(',')}]}`
    // The JSON format itself, read in slices (keys/import-json.ts): 4,000,000 rows (413 before any is
    // parsed), and 2 MiB rows of one object with 150,000 keys each (one row's parse at a time)
    const manyRows = `{"rows":[${Array(4_000_000).fill('0').join(',')}]}`
    const wideRow = `{${Array.from({ length: 150_000 }, (_, i) => `"k${i}":0`).join(',')}}`
    const wideRows = `{"rows":[${Array(Math.floor((8 * 1024 * 1024 - 64) / (wideRow.length + 1))).fill(wideRow).join(',')}]}`
    const body = JSON.stringify({ key: keyValue, device_fingerprint: fingerprint() })
    for (const [name, hostile, check] of [
      // refused for its size before its depth is reached: the fields besides rows hold at most 64 KiB
      ['deep', deep, (res: Awaited<ReturnType<typeof post>>) => expectProblem(res, 400, 'invalid_request')],
      ['flat', flat, (res: Awaited<ReturnType<typeof post>>) => expectProblem(res, 400, 'invalid_request')],
      ['many rows', manyRows, (res: Awaited<ReturnType<typeof post>>) => expectProblem(res, 413, 'payload_too_large')],
      ['wide rows', wideRows, (res: Awaited<ReturnType<typeof post>>) => expect(res.status).toBe(422)],
    ] as const) {
      const slowest: number[] = []
      let done = false
      const imported = post('/v1/keys/import', hostile).finally(() => (done = true))
      while (!done) {
        const t0 = performance.now()
        const res = await post('/v1/validate', body)
        slowest.push(performance.now() - t0)
        expect(res.status).toBe(200)
      }
      check(await imported)
      slowest.sort((a, b) => b - a)
      console.log(`hostile import (${name}, ${(hostile.length / 1048576).toFixed(1)} MiB) in flight: ${slowest.length} validates, slowest ${slowest[0]!.toFixed(1)} ms`)
      expect(slowest.length).toBeGreaterThan(0)
      // generous on a shared machine: the loop used to be held for seconds
      expect(slowest[0]!).toBeLessThan(1_000)
    }
  })
})

// The SDK's own RFC 8785 canonicalizer (client/src/canonical.ts: the package has no dependencies) and
// the server's (the `canonicalize` package, which signs the key set) write the same bytes for every
// shape a key set holds, and for a key set a real node serves (docs/api.md, "The key set").
import { expect, test } from 'bun:test'
import canonicalize from 'canonicalize'
import { canonicalJson } from '../../client/src/canonical.ts'
import { useHarness } from '../support/harness'
import { vendorOn } from './vendor'

const h = useHarness()

const SHAPES: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  9007199254740991,
  '',
  'plain',
  'quote " backslash \\ newline \n tab \t nul \u0000 del \u007f line-sep \u2028 emoji \ud83d\ude00 é',
  [],
  {},
  [null, [true, [{}]], 'x'],
  { b: 1, a: 2, A: 3, _: 4, '10': 5, '9': 6, é: 7, '\u20ac': 8, '\ud83d\ude00': 9, '\ufb33': 10, '\r': 11, '\u0080': 12 },
  { root: { kid: 'ab'.repeat(16), public_key: 'q3J8+/==' }, keys: [{ kid: 'cd'.repeat(16), state: 'revoked', activated_at: null, revoked_at: '2026-11-28T04:00:00.000Z', certificate: 'KWCERT1.x.y' }], issued_at: '2026-11-28T04:00:00.123Z' },
]

test('the SDK\'s canonical JSON is the server\'s for every shape of a key set', () => {
  for (const value of SHAPES) expect({ value, sdk: canonicalJson(value) }).toEqual({ value, sdk: canonicalize(value)! })
})

test('and for the key set a node serves, with signing keys in every state', async () => {
  const { token } = await vendorOn(h)
  const made: string[] = []
  for (let i = 0; i < 3; i++) {
    const res = await h.call('POST', '/v1/signing-keys', { token, body: {} })
    expect(res.status).toBe(201)
    made.push(res.body.kid)
  }
  expect((await h.call('POST', `/v1/signing-keys/${made[0]}/activate`, { token, body: {} })).status).toBe(200)
  expect((await h.call('POST', `/v1/signing-keys/${made[1]}/activate`, { token, body: {} })).status).toBe(200)
  expect((await h.call('POST', `/v1/signing-keys/${made[2]}/revoke`, { token, body: { reason: 'a test' } })).status).toBe(200)
  const { signature: _, ...set } = (await h.call('GET', '/v1/offline/keys', { token })).body
  expect(set.keys.map((k: { state: string }) => k.state).sort()).toEqual(['active', 'retired', 'revoked'])
  expect(canonicalJson(set)).toBe(canonicalize(set)!)
})

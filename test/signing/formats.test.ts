// The chain of trust's pure parts: KWCERT1 made by the server and read by an independent verifier
// (test/support/signing.ts) and by the server's own; the key set's signature over its canonical form;
// and the timeline rule that decides, from the rows alone, which key signs at a given moment.
import { describe, expect, test } from 'bun:test'
import { createPublicKey, generateKeyPairSync } from 'node:crypto'
import { makeCertificate, verifyCertificate } from '../../src/modules/signing/certificate'
import { generateKeyPair, kidOf, rawPublicKey } from '../../src/modules/signing/keys'
import { signKeySet, verifyKeySet } from '../../src/modules/signing/keyset'
import { resolve, type TimedKey } from '../../src/modules/signing/timeline'
import { certifiedKey, keySetVerifies } from '../support/signing'

const root = generateKeyPairSync('ed25519')
const other = generateKeyPairSync('ed25519')
const pair = generateKeyPair()
const raw = rawPublicKey(createPublicKey(pair.publicKeyPem)).toString('base64')
const cert = { kid: pair.kid, public_key: raw, account_id: 'acct_a', created_at: '2026-11-22T10:00:00.000Z' }

describe('KWCERT1', () => {
  test('made by the server, read alike by an independent verifier and by the server', () => {
    const text = makeCertificate(root.privateKey, cert)
    expect(text).toMatch(/^KWCERT1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
    const payload = text.split('.')[1]!
    expect(Buffer.from(payload, 'base64url').toString('utf8')).toBe(JSON.stringify(cert)) // exactly the four fields, in order
    expect(certifiedKey(root.publicKey, text, 'acct_a')?.kid).toBe(pair.kid)
    const read = verifyCertificate(root.publicKey, text, 'acct_a')!
    expect({ kid: read.kid, public_key: read.public_key }).toEqual({ kid: pair.kid, public_key: raw })
    expect(kidOf(read.publicKey)).toBe(pair.kid)
  })

  test('refused: another root, another account, a changed byte, a kid that is not its key\'s, garbage', () => {
    const text = makeCertificate(root.privateKey, cert)
    expect(verifyCertificate(other.publicKey, text)).toBeNull()
    expect(verifyCertificate(root.publicKey, text, 'acct_b')).toBeNull()
    const [p, body, sig] = text.split('.')
    const changed = Buffer.from(body!, 'base64url').toString('utf8').replace('acct_a', 'acct_c')
    expect(verifyCertificate(root.publicKey, `${p}.${Buffer.from(changed).toString('base64url')}.${sig}`)).toBeNull()
    const lying = makeCertificate(root.privateKey, { ...cert, kid: 'f'.repeat(32) })
    expect(verifyCertificate(root.publicKey, lying)).toBeNull()
    expect(certifiedKey(root.publicKey, lying, 'acct_a')).toBeNull()
    for (const junk of ['', 'KWCERT1', 'KWCERT1..', `KWCERT2.${body}.${sig}`, `${text}.x`, 42, null]) expect(verifyCertificate(root.publicKey, junk)).toBeNull()
  })
})

describe('key set', () => {
  const set = {
    root: { kid: kidOf(root.publicKey), public_key: rawPublicKey(root.publicKey).toString('base64') },
    keys: [{ kid: pair.kid, public_key: raw, state: 'active' as const, certificate: 'KWCERT1.x.y', created_at: cert.created_at, activated_at: cert.created_at, revoked_at: null }],
    issued_at: '2026-11-22T11:00:00.000Z',
  }

  test('signed over the canonical JSON of the rest: the server and an independent verifier agree', () => {
    const signed = signKeySet(root.privateKey, set)
    expect(Object.keys(signed)).toEqual(['root', 'keys', 'issued_at', 'signature'])
    expect(verifyKeySet(root.publicKey, signed)).toBe(true)
    expect(keySetVerifies(root.publicKey, JSON.parse(JSON.stringify(signed)))).toBe(true)
    // the same object with its keys in another order verifies too (canonical form)
    const reordered = { signature: signed.signature, issued_at: signed.issued_at, keys: signed.keys, root: { public_key: set.root.public_key, kid: set.root.kid } }
    expect(keySetVerifies(root.publicKey, reordered)).toBe(true)
  })

  test('refused: a changed state, a dropped key, another root', () => {
    const signed = signKeySet(root.privateKey, set)
    expect(verifyKeySet(root.publicKey, { ...signed, keys: [{ ...signed.keys[0]!, state: 'retired' }] })).toBe(false)
    expect(verifyKeySet(root.publicKey, { ...signed, keys: [] })).toBe(false)
    expect(verifyKeySet(other.publicKey, signed)).toBe(false)
  })
})

describe('timeline: which key signs at a moment', () => {
  const at = (iso: string) => new Date(iso)
  const key = (kid: string, state: TimedKey['state'], activate_at: string | null = null, activated_at: string | null = null): TimedKey => ({
    kid,
    state,
    activate_at: activate_at === null ? null : at(activate_at),
    activated_at: activated_at === null ? null : at(activated_at),
  })
  const now = Date.parse('2026-11-22T12:00:00.000Z')

  test('no key, or only pending, retired and revoked ones: the root (null)', () => {
    expect(resolve([], now).signer).toBeNull()
    expect(resolve([key('p', 'pending'), key('r', 'retired', null, '2026-11-01T00:00:00Z'), key('x', 'revoked', null, '2026-11-02T00:00:00Z')], now).signer).toBeNull()
  })

  test('the active key signs whatever its activated_at says of this clock (the writer\'s clock may be ahead)', () => {
    expect(resolve([key('a', 'active', null, '2026-11-22T12:00:05.000Z')], now).signer).toBe('a')
  })

  test('a scheduled key takes over at its time; the one before it shows retired from then', () => {
    const keys = [key('a', 'active', null, '2026-11-01T00:00:00Z'), key('s', 'pending', '2026-11-22T12:00:00.000Z')]
    expect(resolve(keys, now - 1).signer).toBe('a')
    const r = resolve(keys, now)
    expect(r.signer).toBe('s')
    expect(r.keys.map((k) => [k.kid, k.effective, k.since?.toISOString() ?? null])).toEqual([
      ['a', 'retired', '2026-11-01T00:00:00.000Z'],
      ['s', 'active', '2026-11-22T12:00:00.000Z'],
    ])
    // two scheduled keys: the latest whose time has come
    const two = [...keys, key('t', 'pending', '2026-11-22T11:00:00.000Z')]
    expect(resolve(two, now).signer).toBe('s')
    expect(resolve(two, now - 1).signer).toBe('t')
    // a revoked scheduled key never takes over
    expect(resolve([key('a', 'active', null, '2026-11-01T00:00:00Z'), key('s', 'revoked', '2026-11-22T11:00:00.000Z')], now).signer).toBe('a')
  })
})

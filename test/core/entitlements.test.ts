// Entitlements: the shape of a map (codes, values, count), the merge of a key's own map over its
// policy's (null removes), and which required codes are missing (request order).
import { describe, expect, test } from 'bun:test'
import { checkEntitlements, mergeEntitlements, missingEntitlements } from '../../src/core/entitlements'

describe('checkEntitlements', () => {
  test('good maps: true, finite numbers, strings of 1..200; codes of a-z 0-9 . _ : -', () => {
    expect(checkEntitlements({}, false)).toEqual([])
    expect(checkEntitlements({ export: true, projects: 5, ratio: -0.5, tier: 'pro', 'a.b_c:d-e': true, '0x': 'x'.repeat(200) }, false)).toEqual([])
    expect(checkEntitlements({ ['a'.repeat(64)]: true }, false)).toEqual([])
    expect(checkEntitlements(Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`c${i}`, true])), false)).toEqual([])
  })

  test('null removes an inherited code on a key, and is refused on a policy', () => {
    expect(checkEntitlements({ export: null }, true)).toEqual([])
    expect(checkEntitlements({ export: null }, false)).toEqual([{ code: 'export', message: expect.stringContaining('must be true') }])
  })

  test('bad maps list every problem', () => {
    expect(checkEntitlements(null, true)).toEqual([{ code: null, message: 'must be a JSON object' }])
    expect(checkEntitlements([true], true)).toEqual([{ code: null, message: 'must be a JSON object' }])
    expect(checkEntitlements('export', true)).toHaveLength(1)
    const bad = checkEntitlements({ Export: true, '-x': true, ['a'.repeat(65)]: true, '': true, 'a b': true, ok: false, n: 0, s: '', long: 'x'.repeat(201), arr: [1], obj: {} }, true)
    expect(bad.map((p) => p.code)).toEqual(['Export', '-x', 'a'.repeat(65), '', 'a b', 'ok', 's', 'long', 'arr', 'obj'])
    expect(checkEntitlements(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, true])), false)).toEqual([
      { code: null, message: 'must hold at most 64 entries' },
    ])
  })
})

describe('mergeEntitlements', () => {
  test("the key's own values add and override; null removes an inherited code; nulls never show", () => {
    const policy = { export: true as const, projects: 5, tier: 'pro' }
    expect(mergeEntitlements(policy, {})).toEqual(policy)
    expect(mergeEntitlements(policy, { projects: 50, sso: true, tier: null })).toEqual({ export: true, projects: 50, sso: true })
    expect(mergeEntitlements(null, { sso: true, gone: null })).toEqual({ sso: true })
    expect(mergeEntitlements(null, {})).toEqual({})
    expect(policy).toEqual({ export: true, projects: 5, tier: 'pro' }) // the policy's map is not touched
  })
})

describe('missingEntitlements', () => {
  test('the codes not in the set, in request order, each once', () => {
    const set = { export: true as const, projects: 5 }
    expect(missingEntitlements(set, ['export', 'projects'])).toEqual([])
    expect(missingEntitlements(set, ['sso', 'export', 'audit', 'sso'])).toEqual(['sso', 'audit'])
    expect(missingEntitlements({}, ['toString', 'constructor'])).toEqual(['toString', 'constructor'])
  })
})

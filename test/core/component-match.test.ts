import { describe, expect, test } from 'bun:test'
import { componentsMatch, parseComponents, pickRebind, withReplaced } from '../../src/core/component-match'

const h = (c: string) => c.repeat(64)
const S = { machine_id: h('a'), disk: h('b'), mac: h('c'), cpu: h('d') }

describe('component rule', () => {
  test('each rule over n = 4 stored components', () => {
    const one = { machine_id: h('a'), disk: h('0'), mac: h('0'), cpu: h('0') }
    const two = { machine_id: h('a'), disk: h('b'), mac: h('0') }
    const three = { machine_id: h('a'), disk: h('b'), mac: h('c') }
    expect([componentsMatch('any', S, one), componentsMatch('two', S, one), componentsMatch('most', S, one), componentsMatch('all', S, one)]).toEqual([true, false, false, false])
    expect([componentsMatch('any', S, two), componentsMatch('two', S, two), componentsMatch('most', S, two), componentsMatch('all', S, two)]).toEqual([true, true, false, false])
    expect([componentsMatch('most', S, three), componentsMatch('all', S, three), componentsMatch('all', S, { ...S, extra: h('e') })]).toEqual([true, false, true])
  })
  test('two with one stored component needs that one; nothing stored matches nothing; off matches nothing', () => {
    expect(componentsMatch('two', { container: h('a') }, { container: h('a') })).toBe(true)
    expect(componentsMatch('any', null, S)).toBe(false)
    expect(componentsMatch('any', {}, S)).toBe(false)
    expect(componentsMatch('off', S, S)).toBe(false)
  })
  test('form: 1..16 entries, names, 64 hex lower-cased; null is omitted', () => {
    expect(parseComponents(null)).toEqual({ ok: true, components: null })
    expect(parseComponents({ disk: 'A'.repeat(64) })).toEqual({ ok: true, components: { disk: 'a'.repeat(64) } })
    expect(parseComponents({})).toMatchObject({ ok: false, field: 'components' })
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, h('a')]))
    expect(parseComponents(many)).toMatchObject({ ok: false, field: 'components' })
    expect(parseComponents({ Disk: h('a') })).toMatchObject({ ok: false, field: 'components' })
    expect(parseComponents({ disk: 'xyz' })).toMatchObject({ ok: false, field: 'components.disk' })
    expect(parseComponents([h('a')])).toMatchObject({ ok: false })
  })
  test('rebind: most matching first, then the latest validation', () => {
    const sent = { machine_id: h('a'), disk: h('b') }
    const picked = pickRebind('any', sent, [
      { item: 'one', components: { machine_id: h('a') }, lastValidatedAt: 9 },
      { item: 'both-old', components: { machine_id: h('a'), disk: h('b') }, lastValidatedAt: 1 },
      { item: 'both-new', components: { machine_id: h('a'), disk: h('b') }, lastValidatedAt: 5 },
    ])
    expect(picked).toBe('both-new')
    expect(pickRebind('all', sent, [{ item: 'x', components: S, lastValidatedAt: 1 }])).toBeNull()
  })
  test('replaced fingerprints: newest first, at most 8, no repeats', () => {
    let r: string[] = []
    for (let i = 0; i < 10; i++) r = withReplaced(r, `f${i}`)
    expect(r).toEqual(['f9', 'f8', 'f7', 'f6', 'f5', 'f4', 'f3', 'f2'])
    expect(withReplaced(['a', 'b'], 'b')).toEqual(['b', 'a'])
  })
})

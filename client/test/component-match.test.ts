// The client's copy of the machine-identity rule (src/component-match.ts) against the same cases as the
// service's own (test/core/component-match.test.ts in the repository): the two must never disagree.
import { describe, expect, test } from 'bun:test'
import { componentsMatch, parseComponents } from '../src/component-match.ts'

const h = (c: string) => c.repeat(64)
const S = { machine_id: h('a'), disk: h('b'), mac: h('c'), cpu: h('d') }

describe('component rule (client copy)', () => {
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
  test('most is a strict majority; hashes compare ignoring case', () => {
    const n2 = { a: h('1'), b: h('2') }
    expect(componentsMatch('most', n2, { a: h('1') })).toBe(false)
    expect(componentsMatch('most', n2, { a: h('1'), b: h('2') })).toBe(true)
    expect(componentsMatch('all', { a: h('A') }, { a: h('a') })).toBe(true)
    expect(componentsMatch('any', S, null)).toBe(false)
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
})

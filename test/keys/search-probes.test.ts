// probesOf (src/modules/keys/search.ts): the parts of a search the trigram index is asked for. Each
// must be a part of q itself (a key whose e-mail or name contains q contains each of them, so asking
// for them loses no match), and they avoid the common trigrams a whole q holds.
import { expect, test } from 'bun:test'
import { probesOf } from '../../src/modules/keys/search'

test('words of 3 or more, the longest first; a long word as its head and its tail', () => {
  expect(probesOf('james smith')).toEqual(['james', 'smith'])
  expect(probesOf('rodriguez48213')).toEqual(['rodrigue', 'uez48213'])
  expect(probesOf('jean-luc picard')).toEqual(['picard', 'jean', 'luc'])
  expect(probesOf('li wang')).toEqual(['wang'])
  expect(probesOf('Müller')).toEqual(['Müller'])
})

test('an address: the characters around its @; a q with no word: itself (or its first 8)', () => {
  expect(probesOf('jane.doe@acme.example')).toEqual(['.doe@acm'])
  expect(probesOf('jane@acme.com')).toEqual(['jane@acm'])
  expect(probesOf('ab')).toEqual(['ab'])
  expect(probesOf('x.y')).toEqual(['x.y'])
})

test('every probe is a part of q', () => {
  for (const q of ['james smith', 'mary.smith42', 'a-b-c-d', 'O\'Brien & Sons', 'renée lefèvre 2024', '@3fa9c1b2.example', 'zz']) {
    for (const p of probesOf(q)) expect(q.includes(p)).toBe(true)
  }
})

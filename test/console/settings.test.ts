// What the console says about a key's and a policy's settings before asking the API: terms in words,
// amounts with a unit, and the ranges the API enforces (so an error sits under its field at once).
import { expect, test } from 'bun:test'
import { checks, graceInWords, splitSeconds, termInWords, toSeconds } from '../../src/console/app/settings'

test('a term (ISO 8601 period) is told in words; perpetual without one', () => {
  expect(termInWords('P1Y')).toBe('1 year')
  expect(termInWords('P1Y6M')).toBe('1 year 6 months')
  expect(termInWords('P14D')).toBe('14 days')
  expect(termInWords('PT12H')).toBe('12 hours')
  expect(termInWords('P2WT30M')).toBe('2 weeks 30 minutes')
  expect(termInWords(null)).toBe('Perpetual')
})

test('seconds as an amount in the largest unit that divides them, and back', () => {
  expect(splitSeconds(2 * 86400)).toEqual({ amount: '2', unit: 'days' })
  expect(splitSeconds(5400)).toEqual({ amount: '90', unit: 'minutes' })
  expect(splitSeconds(null)).toEqual({ amount: '', unit: 'days' })
  expect(toSeconds('1.5', 'hours')).toBe(5400)
  expect(toSeconds(' ', 'days')).toBeNull()
  expect(graceInWords(0)).toBe('None')
  expect(graceInWords(3 * 86400)).toBe('3 days')
})

test('the API’s ranges, checked in the browser with the field they belong to', () => {
  expect(checks.limit('3', 'body.activation_limit')).toBeNull()
  for (const bad of ['0', '10001', '2.5', '', 'x']) expect(checks.limit(bad, 'body.activation_limit')?.field).toBe('body.activation_limit')
  expect(checks.release(60, 'r')).toBeNull()
  expect(checks.release(59, 'r')?.message).toContain('1 minute')
  expect(checks.release(31536001, 'r')).not.toBeNull()
  expect(checks.deactivations(0, 'd')).toBeNull()
  expect(checks.deactivations(-1, 'd')).not.toBeNull()
  expect(checks.grace(31536000, 'g')).toBeNull()
  expect(checks.grace(31536001, 'g')).not.toBeNull()
})

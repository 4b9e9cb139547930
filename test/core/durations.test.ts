// ISO 8601 periods: what parses (and what is refused, with the bounds PT1M..P100Y), and the calendar
// arithmetic in UTC (years, then months clamped to the month's end, then weeks, days, hours, minutes).
import { describe, expect, test } from 'bun:test'
import { addPeriod, parsePeriod, type Period } from '../../src/core/durations'

const at = (iso: string) => Date.parse(iso)
const plus = (iso: string, period: string) => {
  const p = parsePeriod(period)
  if (typeof p === 'string') throw new Error(`${period}: ${p}`)
  return new Date(addPeriod(at(iso), p)).toISOString()
}
const zero: Period = { years: 0, months: 0, weeks: 0, days: 0, hours: 0, minutes: 0 }

describe('parsePeriod', () => {
  test('each part and their combinations', () => {
    expect(parsePeriod('P1Y')).toEqual({ ...zero, years: 1 })
    expect(parsePeriod('P1M')).toEqual({ ...zero, months: 1 })
    expect(parsePeriod('P2W')).toEqual({ ...zero, weeks: 2 })
    expect(parsePeriod('P14D')).toEqual({ ...zero, days: 14 })
    expect(parsePeriod('PT12H')).toEqual({ ...zero, hours: 12 })
    expect(parsePeriod('PT1M')).toEqual({ ...zero, minutes: 1 })
    expect(parsePeriod('P1Y6M')).toEqual({ ...zero, years: 1, months: 6 })
    expect(parsePeriod('P1Y2M3W4DT5H6M')).toEqual({ years: 1, months: 2, weeks: 3, days: 4, hours: 5, minutes: 6 })
    expect(parsePeriod('P100Y')).toEqual({ ...zero, years: 100 })
    expect(parsePeriod('P1200M')).toEqual({ ...zero, months: 1200 }) // = P100Y
    expect(parsePeriod('PT60S' as string)).toBeTypeOf('string') // no seconds
  })

  test('malformed periods are refused with a message', () => {
    for (const bad of ['', 'P', 'PT', 'P1', '1Y', 'P1Y1T', 'P1D T1H', 'p1y', 'P1.5Y', 'P-1D', 'P1M1Y', 'PT1H1D', 'P1DT', 'P1S', 'PT1.5H', ' P1D', 'P1D ', 'P1Y2Y']) {
      expect(parsePeriod(bad)).toBeTypeOf('string')
    }
  })

  test('bounds: at least PT1M, at most P100Y', () => {
    expect(parsePeriod('PT0M')).toBe('must be at least PT1M')
    expect(parsePeriod('P0D')).toBe('must be at least PT1M')
    expect(parsePeriod('P0Y0M')).toBe('must be at least PT1M')
    expect(parsePeriod('P101Y')).toBe('must be at most P100Y')
    expect(parsePeriod('P100YT1M')).toBe('must be at most P100Y')
    expect(parsePeriod('P1201M')).toBe('must be at most P100Y')
    expect(parsePeriod('P36525D')).toBe('must be at most P100Y') // 100 years hold only 24 leap days
    expect(parsePeriod('P36524D')).toEqual({ ...zero, days: 36524 })
    expect(parsePeriod('P99999999999999999999Y')).toBeTypeOf('string')
    expect(parsePeriod('P9999999Y')).toBe('must be at most P100Y')
  })
})

describe('addPeriod: calendar arithmetic in UTC', () => {
  test('months clamp to the last day of the month', () => {
    expect(plus('2027-01-31T10:00:00.000Z', 'P1M')).toBe('2027-02-28T10:00:00.000Z')
    expect(plus('2028-01-31T10:00:00.000Z', 'P1M')).toBe('2028-02-29T10:00:00.000Z') // leap year
    expect(plus('2027-03-31T00:00:00.000Z', 'P1M')).toBe('2027-04-30T00:00:00.000Z')
    expect(plus('2027-01-31T00:00:00.000Z', 'P2M')).toBe('2027-03-31T00:00:00.000Z') // not Feb 28 + 1 month
    expect(plus('2027-08-31T00:00:00.000Z', 'P6M')).toBe('2028-02-29T00:00:00.000Z')
    expect(plus('2027-12-15T08:30:00.000Z', 'P1M')).toBe('2028-01-15T08:30:00.000Z') // into the next year
    expect(plus('2027-11-30T00:00:00.000Z', 'P14M')).toBe('2029-01-30T00:00:00.000Z')
  })

  test('years: Feb 29 + P1Y is Feb 28; + P4Y is Feb 29 again', () => {
    expect(plus('2028-02-29T12:00:00.000Z', 'P1Y')).toBe('2029-02-28T12:00:00.000Z')
    expect(plus('2028-02-29T12:00:00.000Z', 'P4Y')).toBe('2032-02-29T12:00:00.000Z')
    expect(plus('2027-06-01T00:00:00.000Z', 'P100Y')).toBe('2127-06-01T00:00:00.000Z')
    expect(plus('2099-02-28T00:00:00.000Z', 'P1Y')).toBe('2100-02-28T00:00:00.000Z') // 2100 is no leap year
  })

  test('years, then months, then weeks and days: the order matters', () => {
    // Jan 31 + 1 month = Feb 28, then + 1 day = Mar 1 (days after the clamp)
    expect(plus('2027-01-31T00:00:00.000Z', 'P1M1D')).toBe('2027-03-01T00:00:00.000Z')
    // 2028-01-31 + 1 year = 2029-01-31, + 1 month = 2029-02-28 (the year is added first)
    expect(plus('2028-01-31T00:00:00.000Z', 'P1Y1M')).toBe('2029-02-28T00:00:00.000Z')
    expect(plus('2027-02-20T00:00:00.000Z', 'P1W2D')).toBe('2027-03-01T00:00:00.000Z')
    expect(plus('2028-02-20T00:00:00.000Z', 'P9D')).toBe('2028-02-29T00:00:00.000Z')
  })

  test('hours and minutes are exact (UTC has no daylight saving), keeping seconds and milliseconds', () => {
    expect(plus('2027-03-28T00:30:15.250Z', 'PT12H')).toBe('2027-03-28T12:30:15.250Z')
    expect(plus('2027-12-31T23:59:00.000Z', 'PT1M')).toBe('2028-01-01T00:00:00.000Z')
    expect(plus('2027-01-01T00:00:00.000Z', 'P14D')).toBe('2027-01-15T00:00:00.000Z')
    expect(plus('2027-01-01T00:00:00.000Z', 'P1DT1H1M')).toBe('2027-01-02T01:01:00.000Z')
  })
})

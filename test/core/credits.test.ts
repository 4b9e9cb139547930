import { expect, test } from 'bun:test'
import { applyRefills, boundariesPassed, MAX_CREDITS, nextBoundary, type RefillRule } from '../../src/core/credits'

const at = (iso: string) => Date.parse(iso)
const daily = (mode: RefillRule['mode'] = 'top_up', amount = 100): RefillRule => ({ amount, interval: 'day', day_of_month: 1, mode })
const monthly = (day: number, mode: RefillRule['mode'] = 'top_up', amount = 100): RefillRule => ({ amount, interval: 'month', day_of_month: day, mode })

test('a daily rule refills at the next 00:00 UTC, strictly after the instant given', () => {
  expect(nextBoundary(daily(), at('2026-03-04T13:00:00Z'))).toBe(at('2026-03-05T00:00:00Z'))
  expect(nextBoundary(daily(), at('2026-03-05T00:00:00Z'))).toBe(at('2026-03-06T00:00:00Z'))
  expect(nextBoundary(daily(), at('2026-12-31T23:59:59Z'))).toBe(at('2027-01-01T00:00:00Z'))
})

test('a monthly rule refills on day_of_month, clamped to the last day of shorter months', () => {
  expect(nextBoundary(monthly(15), at('2026-03-04T13:00:00Z'))).toBe(at('2026-03-15T00:00:00Z'))
  expect(nextBoundary(monthly(15), at('2026-03-15T00:00:00Z'))).toBe(at('2026-04-15T00:00:00Z'))
  expect(nextBoundary(monthly(31), at('2026-02-01T00:00:00Z'))).toBe(at('2026-02-28T00:00:00Z'))
  expect(nextBoundary(monthly(31), at('2028-02-01T00:00:00Z'))).toBe(at('2028-02-29T00:00:00Z')) // leap year
  expect(nextBoundary(monthly(31), at('2026-02-28T00:00:00Z'))).toBe(at('2026-03-31T00:00:00Z'))
  expect(nextBoundary(monthly(30), at('2026-04-30T00:00:00Z'))).toBe(at('2026-05-30T00:00:00Z'))
  expect(nextBoundary(monthly(1), at('2026-12-20T00:00:00Z'))).toBe(at('2027-01-01T00:00:00Z'))
})

test('boundaries passed are counted from the last one applied, however long nothing read the balance', () => {
  expect(boundariesPassed(daily(), at('2026-03-04T13:00:00Z'), at('2026-03-04T23:59:59Z'))).toEqual({ passed: 0, last: at('2026-03-04T13:00:00Z') })
  expect(boundariesPassed(daily(), at('2026-03-04T13:00:00Z'), at('2026-03-05T00:00:00Z'))).toEqual({ passed: 1, last: at('2026-03-05T00:00:00Z') })
  expect(boundariesPassed(daily(), at('2026-03-04T13:00:00Z'), at('2026-03-14T08:00:00Z'))).toEqual({ passed: 10, last: at('2026-03-14T00:00:00Z') })
  expect(boundariesPassed(monthly(31), at('2026-01-31T00:00:00Z'), at('2026-05-01T00:00:00Z'))).toEqual({ passed: 3, last: at('2026-04-30T00:00:00Z') })
})

test('top_up raises the balance to the amount once, whatever the number of boundaries, and never cuts a larger balance', () => {
  const since = at('2026-03-04T13:00:00Z')
  expect(applyRefills(7, daily('top_up'), since, at('2026-03-09T01:00:00Z'))).toEqual({
    remaining: 100, since: at('2026-03-09T00:00:00Z'), passed: 5, refillsAt: at('2026-03-10T00:00:00Z'),
  })
  expect(applyRefills(250, daily('top_up'), since, at('2026-03-09T01:00:00Z'))!.remaining).toBe(250)
  // credits still held by node leases count as held: the top-up fills up to the amount in all
  expect(applyRefills(0, daily('top_up'), since, at('2026-03-05T01:00:00Z'), 30)!.remaining).toBe(70)
  expect(applyRefills(80, daily('top_up'), since, at('2026-03-05T01:00:00Z'), 30)!.remaining).toBe(80)
})

test('add adds the amount once per boundary passed, capped at the maximum balance', () => {
  const since = at('2026-01-15T10:00:00Z')
  const r = applyRefills(5, monthly(15, 'add', 40), since, at('2026-04-20T00:00:00Z'))!
  expect(r).toEqual({ remaining: 125, since: at('2026-04-15T00:00:00Z'), passed: 3, refillsAt: at('2026-05-15T00:00:00Z') })
  expect(applyRefills(MAX_CREDITS - 1, daily('add'), since, at('2026-01-20T00:00:00Z'))!.remaining).toBe(MAX_CREDITS)
})

test('nothing due: the balance and the last boundary stay; no rule: no refill', () => {
  const since = at('2026-03-04T13:00:00Z')
  expect(applyRefills(3, daily(), since, at('2026-03-04T20:00:00Z'))).toEqual({ remaining: 3, since, passed: 0, refillsAt: at('2026-03-05T00:00:00Z') })
  expect(applyRefills(3, null, since, at('2026-03-09T00:00:00Z'))).toBeNull()
})

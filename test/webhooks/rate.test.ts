// The finish rate that sizes the worker's claimed-ahead backlog: measured over windows, and falling as
// soon as the slots stop finishing (a receiver that turned slow).
import { expect, test } from 'bun:test'
import { FinishRate } from '../../src/modules/webhooks/rate'

test('attempts per second over a window; a long silent window brings it down at once', () => {
  let t = 0
  const rate = new FinishRate(100, () => t)
  expect(rate.perSecond()).toBe(0)
  for (let i = 0; i < 50; i++) {
    t += 2
    rate.count()
  }
  expect(rate.perSecond()).toBe(500) // 50 in 100 ms
  t += 50
  expect(rate.perSecond()).toBe(500) // the open window is still short
  t += 950
  expect(rate.perSecond()).toBe(0) // a second without a finish
  rate.count()
  expect(rate.perSecond()).toBeCloseTo(1, 0)
})

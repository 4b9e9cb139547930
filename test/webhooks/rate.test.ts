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

test('the recent peak: the fastest full window of the last 30 s, kept while the worker idles, then gone', () => {
  let t = 0
  const rate = new FinishRate(100, () => t)
  expect(rate.recentPeak()).toBe(0)
  const finish = (n: number, everyMs: number) => {
    for (let i = 0; i < n; i++) {
      t += everyMs
      rate.count()
    }
  }
  finish(100, 1) // 1,000 per second
  expect(rate.recentPeak()).toBe(1000)
  finish(20, 10) // a slower window (100 per second) does not lower the peak
  expect(rate.perSecond()).toBe(100)
  expect(rate.recentPeak()).toBe(1000)
  t += 10_000 // idle: perSecond has fallen to nothing, the peak is remembered
  expect(rate.perSecond()).toBe(0)
  expect(rate.recentPeak()).toBe(1000)
  t += 25_000 // more than 30 s after the peak's window
  expect(rate.recentPeak()).toBe(0)
  finish(20, 10) // the next windows set a new peak, however slow
  expect(rate.recentPeak()).toBe(100)
})

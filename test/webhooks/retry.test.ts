// The retry schedule of the contract: 8 attempts, delays 5 s … 10 h with ±10% jitter, then failed.
import { expect, test } from 'bun:test'
import { loadConfig } from '../../src/config'
import { decide } from '../../src/modules/webhooks/worker'

const failure = (statusCode: number | null) => ({ statusCode, success: false, durationMs: 1, error: 'x' })

test('the default schedule is the contract one: 7 retries, then failed', () => {
  const delays = loadConfig({}).webhookRetryDelaysMs
  expect(delays).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000])
  for (let attempt = 1; attempt <= 7; attempt++) {
    expect(decide(attempt, failure(500), delays, () => 0.5)).toEqual({ kind: 'retry', delayMs: delays[attempt - 1] })
  }
  expect(decide(8, failure(500), delays)).toEqual({ kind: 'failed' })
  expect(decide(8, failure(null), delays)).toEqual({ kind: 'failed' })
})

test('jitter stays within ±10%', () => {
  expect(decide(1, failure(503), [5_000], () => 0)).toEqual({ kind: 'retry', delayMs: 4_500 })
  expect(decide(1, failure(503), [5_000], () => 0.999999)).toEqual({ kind: 'retry', delayMs: 5_500 })
  const seen = new Set<number>()
  for (let i = 0; i < 200; i++) {
    const v = decide(2, failure(null), [1, 300_000])
    if (v.kind !== 'retry') throw new Error('expected a retry')
    expect(v.delayMs).toBeGreaterThanOrEqual(270_000)
    expect(v.delayMs).toBeLessThanOrEqual(330_000)
    seen.add(v.delayMs)
  }
  expect(seen.size).toBeGreaterThan(100) // spread, not one value
})

test('2xx succeeds, 410 disables, whatever the attempt number', () => {
  expect(decide(1, { statusCode: 204, success: true, durationMs: 1, error: null }, [1])).toEqual({ kind: 'succeeded' })
  expect(decide(1, failure(410), [1, 1])).toEqual({ kind: 'gone' })
  expect(decide(9, failure(410), [1])).toEqual({ kind: 'gone' })
})

test('WEBHOOK_RETRY_DELAYS_MS and WEBHOOK_TIMEOUT_MS configure it', () => {
  const config = loadConfig({ WEBHOOK_RETRY_DELAYS_MS: '10,20', WEBHOOK_TIMEOUT_MS: '1500' })
  expect(config.webhookRetryDelaysMs).toEqual([10, 20])
  expect(config.webhookTimeoutMs).toBe(1500)
  expect(loadConfig({}).webhookTimeoutMs).toBe(15_000)
  expect(decide(3, failure(500), config.webhookRetryDelaysMs)).toEqual({ kind: 'failed' })
})

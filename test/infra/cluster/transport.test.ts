// withTimeout (src/infra/cluster/transport.ts): the answer or a timeout, and no timer left behind once
// the promise has settled (one is made per publish wait, beat and barrier).
import { afterEach, expect, test } from 'bun:test'
import { join } from 'node:path'
import { withTimeout } from '../../../src/infra/cluster/transport'

const realSet = globalThis.setTimeout
const realClear = globalThis.clearTimeout
afterEach(() => {
  globalThis.setTimeout = realSet
  globalThis.clearTimeout = realClear
})

/** Records the timers made and cleared while `fn` runs. */
async function timers<T>(fn: () => Promise<T>) {
  const made: unknown[] = []
  const cleared: unknown[] = []
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    const t = realSet(...args)
    made.push(t)
    return t
  }) as typeof setTimeout
  globalThis.clearTimeout = ((t: Parameters<typeof clearTimeout>[0]) => {
    cleared.push(t)
    return realClear(t)
  }) as typeof clearTimeout
  let result: PromiseSettledResult<T>
  try {
    result = { status: 'fulfilled', value: await fn() }
  } catch (reason) {
    result = { status: 'rejected', reason }
  } finally {
    globalThis.setTimeout = realSet
    globalThis.clearTimeout = realClear
  }
  return { result, made, cleared }
}

test('a promise that settles first: its value, and its one timer cleared', async () => {
  const { result, made, cleared } = await timers(() => withTimeout(Promise.resolve(42), 3_600_000))
  expect(result).toEqual({ status: 'fulfilled', value: 42 })
  expect(made).toHaveLength(1)
  expect(cleared).toContain(made[0])
})

test("a promise that rejects first: its error, and its timer cleared", async () => {
  const boom = new Error('boom')
  const { result, made, cleared } = await timers(() => withTimeout(Promise.reject(boom), 3_600_000))
  expect(result).toEqual({ status: 'rejected', reason: boom })
  expect(made).toHaveLength(1)
  expect(cleared).toContain(made[0])
})

test('a promise that never settles: a timeout', async () => {
  await expect(withTimeout(new Promise(() => {}), 5)).rejects.toThrow('timeout')
})

test('a process whose calls all settled exits on its own (no hour-long timer keeps it alive)', async () => {
  const module = join(import.meta.dir, '..', '..', '..', 'src', 'infra', 'cluster', 'transport.ts')
  const script = `const { withTimeout } = await import(${JSON.stringify(module)}); for (let i = 0; i < 100; i++) await withTimeout(Promise.resolve(i), 3_600_000); console.log('done')`
  const proc = Bun.spawn([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'pipe' })
  expect(await proc.exited).toBe(0)
  expect(await new Response(proc.stdout).text()).toBe('done\n')
}, 30_000)

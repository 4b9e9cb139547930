// Contract test of the one place that reads pino's internals (src/infra/access-log.ts, through
// `pino.symbols`): the line it writes by hand must be the line pino writes for the same fields (same
// keys, same order, same bindings and time format), into the same destination. A pino upgrade that
// changes the destination, the bindings or the time function fails here.
import { expect, test } from 'bun:test'
import { spawn, spawnSync } from 'bun'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { AccessLog } from '../../src/infra/access-log'
import { createLogger, type Logger } from '../../src/infra/log'

/** The file's lines once `n` complete ones are there (pino's destination opens and writes asynchronously). */
async function linesOf(file: string, log: Logger, n: number): Promise<string[]> {
  for (let i = 0; i < 200; i++) {
    log.flush()
    const text = existsSync(file) ? readFileSync(file, 'utf8') : ''
    if (text.split('\n').length > n) return text.trim().split('\n')
    await Bun.sleep(10)
  }
  throw new Error(`fewer than ${n} lines in ${file}`)
}

/** pino's destination for `log` once it has opened its file (the access log then writes to its descriptor). */
async function opened(log: Logger) {
  const dest = (log as unknown as Record<symbol, { fd: number }>)[pino.symbols.streamSym]
  for (let i = 0; i < 200 && dest.fd < 0; i++) await Bun.sleep(10)
  expect(dest.fd).toBeGreaterThanOrEqual(0)
}

test('a batched access-log line is the line pino writes itself', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'keyward-access-log-')), 'log.jsonl')
  const log = createLogger('info', file)
  await opened(log)
  const access = new AccessLog(log)
  log.info({ method: 'POST', route: '/v1/validate', status: 200, ms: 0.12, request_id: 'req_pino' })
  log.flush()
  access.write('POST', '/v1/validate', 200, 0.12, 'req_hand')
  access.write('POST', '/v1/validate', 429, 3.5, 'req_hand2')
  await access.drain()
  // pino's line and the access log's batch are separate writes: each whole, in either order
  const byId = new Map((await linesOf(file, log, 3)).map((l) => JSON.parse(l)).map((l) => [l.request_id, l]))
  expect(byId.size).toBe(3)
  const [byPino, byHand, second] = ['req_pino', 'req_hand', 'req_hand2'].map((id) => byId.get(id))
  expect(Object.keys(byHand)).toEqual(Object.keys(byPino))
  expect({ ...byHand, time: 0, request_id: '' }).toEqual({ ...byPino, time: 0, request_id: '' })
  expect(byHand.request_id).toBe('req_hand')
  expect(Math.abs(Date.parse(byHand.time) - Date.parse(byPino.time))).toBeLessThan(60_000)
  expect(byHand.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  expect([second.status, second.ms, second.request_id]).toEqual([429, 3.5, 'req_hand2'])
})

test('the duration is printed as JSON prints it (whole numbers, one or two decimals, large values)', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'keyward-access-log-')), 'log.jsonl')
  const log = createLogger('info', file)
  await opened(log)
  const access = new AccessLog(log)
  const values = [0, 0.01, 0.1, 0.12, 1, 2.5, 9.99, 10, 100.05, 1234.5, 60000, 123456.78]
  values.forEach((ms, i) => access.write('POST', '/v1/validate', 200, ms, `req_${i}`))
  await access.drain()
  const text = readFileSync(file, 'utf8')
  values.forEach((ms, i) => expect(text).toContain(`"ms":${JSON.stringify(ms)},"request_id":"req_${i}"}`))
})

test('nothing is written below the info level', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'keyward-access-log-')), 'log.jsonl')
  const log = createLogger('warn', file)
  const access = new AccessLog(log)
  access.write('POST', '/v1/validate', 200, 0.1, 'req_x')
  access.flush()
  log.warn('marker')
  const lines = await linesOf(file, log, 1)
  expect(lines).toHaveLength(1)
  expect(JSON.parse(lines[0]).msg).toBe('marker')
})

/** `count` lines with request ids req_0…, in batches of `per` (each batch flushed: several writes). */
function writeMany(access: AccessLog, count: number, per: number) {
  for (let i = 0; i < count; i++) {
    access.write('POST', '/v1/validate', 200, (i % 500) / 100, `req_${i}`)
    if (i % per === per - 1) access.flush()
  }
}

test('many batches to a file: every line whole, in order, and in the file once drain resolves', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'keyward-access-log-')), 'log.jsonl')
  const log = createLogger('info', file)
  await opened(log)
  const access = new AccessLog(log)
  writeMany(access, 20_000, 3_000) // more than one buffer's worth between flushes too
  await access.drain()
  expect(typeof (access as unknown as { fd: unknown }).fd).toBe('number') // written to the descriptor as bytes
  const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  expect(lines.map((l) => l.request_id)).toEqual(Array.from({ length: 20_000 }, (_, i) => `req_${i}`))
  expect(lines[777].ms).toBe(2.77)
})

test("to a pipe, the batches go through pino's destination, every line whole and in order", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyward-access-log-'))
  const fifo = join(dir, 'fifo')
  const out = join(dir, 'out.jsonl')
  expect(spawnSync(['mkfifo', fifo]).exitCode).toBe(0)
  const reader = spawn(['sh', '-c', `cat "${fifo}" > "${out}"`])
  const log = createLogger('info', fifo)
  await opened(log)
  const access = new AccessLog(log)
  writeMany(access, 5_000, 1_000)
  await access.drain()
  expect((access as unknown as { fd: unknown }).fd).toBeNull() // not to the descriptor: a pipe may split writes
  const lines = (await linesOf(out, log, 5_000)).map((l) => JSON.parse(l))
  expect(lines.map((l) => l.request_id)).toEqual(Array.from({ length: 5_000 }, (_, i) => `req_${i}`))
  reader.kill()
})

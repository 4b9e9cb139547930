// Contract test of the one place that reads pino's internals (src/infra/access-log.ts, through
// `pino.symbols`): the line it writes by hand must be the line pino writes for the same fields (same
// keys, same order, same bindings and time format), into the same destination. A pino upgrade that
// changes the destination, the bindings or the time function fails here.
import { expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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

test('a batched access-log line is the line pino writes itself', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'keyward-access-log-')), 'log.jsonl')
  const log = createLogger('info', file)
  const access = new AccessLog(log)
  log.info({ method: 'POST', route: '/v1/validate', status: 200, ms: 0.12, request_id: 'req_pino' })
  log.flush()
  access.write('POST', '/v1/validate', 200, 0.12, 'req_hand')
  access.write('POST', '/v1/validate', 429, 3.5, 'req_hand2')
  access.flush()
  const lines = (await linesOf(file, log, 3)).map((l) => JSON.parse(l))
  expect(lines).toHaveLength(3)
  const [byPino, byHand, second] = lines
  expect(Object.keys(byHand)).toEqual(Object.keys(byPino))
  expect({ ...byHand, time: 0, request_id: '' }).toEqual({ ...byPino, time: 0, request_id: '' })
  expect(byHand.request_id).toBe('req_hand')
  expect(Math.abs(Date.parse(byHand.time) - Date.parse(byPino.time))).toBeLessThan(60_000)
  expect(byHand.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  expect([second.status, second.ms, second.request_id]).toEqual([429, 3.5, 'req_hand2'])
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

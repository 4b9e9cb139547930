// .ci/suite-log.sh, the part of .ci/run that reads bun's log and decides what a retry may forgive: fed
// logs shaped like bun's (a green run, failed tests in two files, an error between tests, a file that
// does not load, a run cut short, too many files), it retries only when failed tests of named files
// explain every failure.
import { expect, test } from 'bun:test'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const LIB = join(import.meta.dir, '..', '..', '.ci', 'suite-log.sh')
const dir = mkdtempSync(join(tmpdir(), 'suite-log-'))
let n = 0

/** Runs `command` (a function of the library on "$LOG") with `log` as the log file. */
function run(command: string, log: string) {
  const file = join(dir, `log-${n++}.txt`)
  writeFileSync(file, log)
  const out = Bun.spawnSync(['bash', '-c', `set -uo pipefail; source "${LIB}"; LOG="${file}"; ${command}`], { stdout: 'pipe', stderr: 'pipe' })
  return { status: out.exitCode, stdout: out.stdout.toString().trim(), stderr: out.stderr.toString().trim() }
}

const summary = (pass: number, fail: number, errors = 0, files = 4) =>
  `\n ${pass} pass\n ${fail} fail\n${errors ? ` ${errors} error${errors > 1 ? 's' : ''}\n` : ''} 12 expect() calls\nRan ${pass + fail} tests across ${files} files. [32.00ms]\n`

const GREEN = `bun test v1.4.5 (a7733435c)\n\ntest/a/ok.test.ts:\n(pass) fine [0.04ms]\n\ntest/a/more.test.ts:\n(pass) more [0.02ms]\n${summary(2, 0, 0, 2)}`

const TWO_FILES_FAILED = `bun test v1.4.5 (a7733435c)

test/a/ok.test.ts:
(pass) fine [0.04ms]

test/a/fails.test.ts:
(pass) fine too [0.02ms]
error: expect(received).toBe(expected)

Expected: 2
Received: 1

(fail) broken [0.06ms]

test/cluster/races.test.ts:
(fail) races across three nodes > exactly activation_limit activations [2000.00ms]
(fail) races across three nodes > one device, two nodes [10.00ms]
${summary(2, 3)}
3 tests failed:
(fail) broken [0.06ms]
(fail) races across three nodes > exactly activation_limit activations [2000.00ms]
(fail) races across three nodes > one device, two nodes [10.00ms]
`

const ERROR_BETWEEN_TESTS = `bun test v1.4.5 (a7733435c)

test/b/outside.test.ts:
(pass) before [0.13ms]

# Unhandled error between tests
-------------------------------
error: boom between tests
      at <anonymous> (test/b/outside.test.ts:2:79)
-------------------------------

(pass) after [2.73ms]

test/a/fails.test.ts:
(fail) broken [0.06ms]
${summary(2, 1, 1)}`

const FILE_DID_NOT_LOAD = `bun test v1.4.5 (a7733435c)

test/b/loaderr.test.ts:

# Unhandled error between tests
-------------------------------
error: cannot load
-------------------------------

test/a/fails.test.ts:
(fail) broken [0.06ms]
${summary(1, 2)}`

test('the summary counts: pass, fail and errors outside a test (0 when absent)', () => {
  expect(run('echo $(suite_count "$LOG" pass) $(suite_count "$LOG" fail) $(suite_errors "$LOG")', GREEN).stdout).toBe('2 0 0')
  expect(run('echo $(suite_count "$LOG" pass) $(suite_count "$LOG" fail) $(suite_errors "$LOG")', TWO_FILES_FAILED).stdout).toBe('2 3 0')
  expect(run('echo $(suite_count "$LOG" pass) $(suite_count "$LOG" fail) $(suite_errors "$LOG")', ERROR_BETWEEN_TESTS).stdout).toBe('2 1 1')
  expect(run('echo $(suite_count "$LOG" pass) $(suite_count "$LOG" fail) $(suite_errors "$LOG")', 'error: bun crashed\n').stdout).toBe('0 0 0')
})

test('each failed test is attributed to the file it was printed under; the closing recap is not read twice', () => {
  expect(run('fail_attributions "$LOG"', TWO_FILES_FAILED).stdout.split('\n')).toEqual([
    'test/a/fails.test.ts',
    'test/cluster/races.test.ts',
    'test/cluster/races.test.ts',
  ])
  expect(run('fail_attributions "$LOG"', GREEN).stdout).toBe('')
})

test('failed tests of two files explain every failure: both files are retried', () => {
  const out = run('retryable_files "$LOG"', TWO_FILES_FAILED)
  expect(out.status).toBe(0)
  expect(out.stdout.split('\n')).toEqual(['test/a/fails.test.ts', 'test/cluster/races.test.ts'])
})

test('an error between tests is never retried away, even beside a failed test of a file', () => {
  const out = run('retryable_files "$LOG"', ERROR_BETWEEN_TESTS)
  expect(out).toEqual({ status: 1, stdout: '', stderr: '1 error(s) outside any test' })
})

test('a file that did not load (counted as failed, no failed test printed) is not explained: no retry', () => {
  const out = run('retryable_files "$LOG"', FILE_DID_NOT_LOAD)
  expect(out).toEqual({ status: 1, stdout: '', stderr: '2 failed, of which 1 are failed tests of a file' })
})

test('a run cut short (no summary) or failed with no failed test is not retried', () => {
  expect(run('retryable_files "$LOG"', 'bun test v1.4.5\n\ntest/a/ok.test.ts:\n(pass) fine\nSegmentation fault\n')).toEqual({
    status: 1,
    stdout: '',
    stderr: 'the run ended without its summary',
  })
  expect(run('retryable_files "$LOG"', GREEN)).toEqual({ status: 1, stdout: '', stderr: 'the run failed with no failed test' })
})

test('failed tests in more files than the limit are not retried', () => {
  const files = Array.from({ length: 6 }, (_, i) => `test/f${i}.test.ts:\n(fail) t${i} [1.00ms]\n`).join('\n')
  const log = `bun test v1.4.5\n\n${files}${summary(0, 6, 0, 6)}`
  expect(run('retryable_files "$LOG"', log)).toEqual({ status: 1, stdout: '', stderr: '6 files failed (more than 5)' })
  expect(run('retryable_files "$LOG" 6', log).stdout.split('\n')).toHaveLength(6)
})

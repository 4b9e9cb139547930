// client/'s `npm test` (its package.json): the Node half runs every file of client/test/node/ and fails
// when nothing ran (Node 20's `node --test DIR/` runs no test and passes; a file without a test is
// counted as one passing test). Checked on directories made here, and on the real one's script line.
import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const RUNNER = join(import.meta.dir, '..', '..', 'client', 'test', 'run-node.mjs')
const dir = mkdtempSync(join(tmpdir(), 'keyward-node-runner-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const run = (d: string) => {
  const p = Bun.spawnSync(['node', RUNNER, d], { stdout: 'pipe', stderr: 'pipe' })
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() }
}

test('no test file, a file that defines no test, a failing test: each fails; real tests pass and are counted', () => {
  const empty = join(dir, 'none')
  Bun.spawnSync(['mkdir', '-p', empty])
  expect(run(empty)).toMatchObject({ code: 1, err: expect.stringContaining('no test file') })

  const some = join(dir, 'some')
  Bun.spawnSync(['mkdir', '-p', some])
  writeFileSync(join(some, 'a.mjs'), "import { test } from 'node:test'\ntest('one', () => {})\ntest('two', () => {})\n")
  const ok = run(some)
  expect(ok.code).toBe(0)
  expect(ok.out).toContain('# node: 2 tests passed in 1 files')

  writeFileSync(join(some, 'b.mjs'), "import { test } from 'node:test'\n// forgot the tests\n")
  expect(run(some)).toMatchObject({ code: 1, err: expect.stringContaining('b.mjs: ran no test') })

  writeFileSync(join(some, 'b.mjs'), "import { test } from 'node:test'\ntest('bad', () => { throw new Error('no') })\n")
  expect(run(some)).toMatchObject({ code: 1, err: expect.stringContaining('b.mjs: failed') })
})

test("client/package.json's test script runs the Node files through the runner, not `node --test DIR/`", () => {
  const script = JSON.parse(readFileSync(join(import.meta.dir, '..', '..', 'client', 'package.json'), 'utf8')).scripts.test as string
  expect(script).toContain('node test/run-node.mjs')
  expect(script).not.toMatch(/node --test test\/node\/?(\s|$)/)
})

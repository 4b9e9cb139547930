// `npm test`'s Node half: every *.mjs file of test/node/ (or of the directory given) under `node --test`,
// one file at a time, failing when a file ran no test. Node 20's `node --test DIR/` runs nothing and
// passes, and a file that defines no test is reported as one passing test named after the file: both
// are caught here, so a test command that ran nothing fails.
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const dir = resolve(process.argv[2] ?? join(fileURLToPath(new URL('.', import.meta.url)), 'node'))
const files = readdirSync(dir).filter((f) => f.endsWith('.mjs')).sort().map((f) => join(dir, f))
if (files.length === 0) {
  console.error(`no test file (*.mjs) in ${dir}: nothing ran, so this fails`)
  process.exit(1)
}
let total = 0
const problems = []
for (const file of files) {
  const run = spawnSync(process.execPath, ['--test', '--test-reporter=tap', file], { encoding: 'utf8' })
  process.stdout.write(run.stdout)
  process.stderr.write(run.stderr)
  const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(run.stdout)?.[1] ?? 0)
  // A file with no test shows as one test whose name is the file's path.
  const fileAsTest = run.stdout.split('\n').some((l) => /^(not )?ok \d+ - /.test(l) && l.replace(/^(not )?ok \d+ - /, '').trim() === file)
  const passed = count('pass')
  if (run.status !== 0 || count('fail') > 0) problems.push(`${file}: failed`)
  else if (fileAsTest || passed === 0) problems.push(`${file}: ran no test`)
  else total += passed
}
if (problems.length) {
  console.error(problems.join('\n'))
  process.exit(1)
}
console.log(`# node: ${total} tests passed in ${files.length} files`)

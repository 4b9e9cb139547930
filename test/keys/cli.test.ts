// `bun run keyward import FILE --account ID` and `export` as subprocesses, on their own store: a dry
// run, the import (every bad row by line when refused), and an export that a server on the same store
// agrees with.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { useCli } from '../support/cli'
import { client, fingerprint } from '../support/harness'

setDefaultTimeout(180_000)

const { keyward, startNode } = useCli('keyward-cli-import-')
const dir = mkdtempSync(join(tmpdir(), 'keyward-cli-files-'))
const EXAMPLES = join(import.meta.dir, '..', '..', 'docs', 'examples')

test('import a file (dry run, bad rows, then for real) and export it back, for an account', async () => {
  const created = await keyward('accounts', 'create', '--name', 'Migrating Co')
  const accountId = /account_id: (acct_\w+)/.exec(created.stdout)![1]!
  const token = /token: (kw_\w+)/.exec(created.stdout)![1]!
  let node = await startNode()
  await client(node.url)('POST', '/v1/products', { token, body: { name: 'My App', slug: 'my-app' } })
  await node.stop()

  const sheet = join(EXAMPLES, 'spreadsheet.csv')
  const dry = await keyward('import', sheet, '--account', accountId, '--dry-run')
  expect([dry.code, dry.stdout.trim()]).toEqual([0, 'dry run: 3 would be created, 0 skipped (external_id exists)'])

  const bad = join(dir, 'bad.ndjson')
  writeFileSync(bad, `${JSON.stringify({ key: 'fine-value-1', product_slug: 'my-app' })}\n{broken\n${JSON.stringify({ key: 'x', product_slug: 'my-app' })}\n`)
  const refused = await keyward('import', bad, '--account', accountId)
  expect(refused.code).toBe(2)
  expect(refused.stderr).toContain('line 2: row is not valid JSON')
  expect(refused.stderr).toContain('line 3: key must be 6..256 characters')

  const done = await keyward('import', sheet, '--account', accountId)
  expect([done.code, done.stdout]).toEqual([0, 'created: 3\nskipped: 0 (external_id exists)\n'])
  const again = await keyward('import', sheet, '--account', accountId)
  expect(again.stdout).toContain('created: 0\nskipped: 3')

  const out = join(dir, 'keys.ndjson')
  const exported = await keyward('export', '--account', accountId, '--out', out)
  expect([exported.code, exported.stdout.trim()]).toEqual([0, `exported 3 keys to ${out}`])
  const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  expect(rows.map((r) => r.external_id).sort()).toEqual(['row-2', 'row-3', 'row-4'])
  const csv = await keyward('export', '--account', accountId, '--format', 'csv')
  expect(csv.stdout.split('\n')[0]).toStartWith('id,external_id,key_hash')

  // a server on the same store validates the imported values
  node = await startNode()
  try {
    const answer = await client(node.url)('POST', '/v1/validate', { token, body: { key: 'SALE-2019-0002', device_fingerprint: fingerprint() } })
    expect(answer.body).toMatchObject({ valid: true, plan: 'Standard' })
  } finally {
    await node.stop()
  }

  const usage = await keyward('import', sheet)
  expect(usage.code).toBe(2)
  expect(usage.stderr).toContain('--account is required (an acct_ id)')
})

// `bun run keyward accounts list` and `bun run keyward api-keys create` as subprocesses, against a fresh
// real-Postgres database when DATABASE_URL is set, a temp DATA_DIR otherwise: the operator's recovery
// path without a running server.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { useCli } from '../support/cli'
import { client } from '../support/harness'

// Each command starts the store in its own process: embedded, on a loaded machine, that is many seconds.
setDefaultTimeout(300_000)

const { keyward, startNode } = useCli('keyward-cli-accounts-')

async function ok(...args: string[]): Promise<string> {
  const res = await keyward(...args)
  if (res.code !== 0) throw new Error(`keyward ${args.join(' ')}: exit ${res.code}: ${res.stdout}${res.stderr}`)
  return res.stdout
}

const ACCOUNT_ID = /account_id: (acct_[0-9A-HJKMNP-TV-Z]{26})/
const TOKEN = /token: (kw_[A-Za-z0-9]{32})/

test('accounts list: newest first, tab-separated with usage counts; --q filters by name or id prefix', async () => {
  const first = ACCOUNT_ID.exec(await ok('accounts', 'create', '--name', 'Zeta Widgets', '--plan', 'hobby'))![1]!
  const second = ACCOUNT_ID.exec(await ok('accounts', 'create', '--name', 'zeta gadgets'))![1]!
  await ok('accounts', 'create', '--name', 'Other')

  const lines = (await ok('accounts', 'list', '--q', 'ZETA')).trimEnd().split('\n')
  expect(lines[0]).toBe('id\tplan\tcreated_at\tproducts\tkeys\tactive_keys\tactivations\tapi_keys\tname')
  const rows = lines.slice(1, -1).map((l) => l.split('\t'))
  expect(rows.map((r) => r[0])).toEqual([second, first])
  expect(rows[0]!.slice(3)).toEqual(['0', '0', '0', '0', '1', 'zeta gadgets'])
  expect(rows[1]![1]).toBe('hobby')
  expect(rows[1]![8]).toBe('Zeta Widgets')
  expect(lines.at(-1)).toBe('# 1-2 of 2')

  const byId = (await ok('accounts', 'list', '--q', first)).trimEnd().split('\n')
  expect(byId.slice(1, -1).map((l) => l.split('\t')[0])).toEqual([first])

  // each call starts the store (embedded: seconds), so paging is checked once, without a filter
  const paged = (await ok('accounts', 'list', '--page-size', '1')).trimEnd().split('\n')
  expect(paged).toHaveLength(3)
  expect(paged.at(-1)).toMatch(/^# 1-1 of \d+ \(more: --page 1\)$/)
})

test('api-keys create issues a working key to an existing account and prints its token once', async () => {
  const accountId = ACCOUNT_ID.exec(await ok('accounts', 'create', '--name', 'Lost keys'))![1]!
  const out = await ok('api-keys', 'create', '--account', accountId, '--scope', 'full_access', '--name', 'Recovered')
  const token = TOKEN.exec(out)?.[1]
  expect(token).toBeDefined()
  expect(out).toContain(`account_id: ${accountId}`)
  expect(out).toContain('scope: full_access')
  const apiKeyId = /api_key_id: (ak_[0-9A-HJKMNP-TV-Z]{26})/.exec(out)?.[1]
  expect(apiKeyId).toBeDefined()
  // the default name
  const reader = TOKEN.exec(await ok('api-keys', 'create', '--account', accountId, '--scope', 'keys:read'))![1]

  const node = await startNode() // a server on the same store
  try {
    const call = client(node.url)
    expect((await call('GET', '/v1/ping', { token })).body).toEqual({ status: 'ok', accountId, accountName: 'Lost keys' })
    const keys = (await call('GET', '/v1/api-keys', { token })).body.data
    expect(keys.map((k: { name: string; scope: string }) => [k.name, k.scope])).toEqual([
      ['Default', 'full_access'],
      ['Recovered', 'full_access'],
      ['Recovery', 'keys:read'],
    ])
    expect((await call('GET', '/v1/keys', { token: reader })).status).toBe(200)
    const events = await node.deps.sql<{ data: { id: string } }[]>`select data from events
      where account_id = ${accountId} and type = 'api_key.created' order by seq`
    expect(events.map((e) => e.data.id)).toEqual([apiKeyId, keys[2].id])
  } finally {
    await node.stop()
  }
})

test('bad arguments exit 2 and an unknown account exits 1, each with a message and no token', async () => {
  const cases: [string[], number, string][] = [
    [['api-keys', 'create', '--scope', 'validate'], 2, '--account'],
    [['api-keys', 'create', '--account', `acct_${'0'.repeat(26)}`], 2, '--scope'],
    [['api-keys', 'create', '--account', `acct_${'0'.repeat(26)}`, '--scope', 'root'], 2, '--scope'],
    [['api-keys', 'create', '--account', `acct_${'0'.repeat(26)}`, '--scope', 'validate', '--name', ''], 2, '--name'],
    [['accounts', 'list', '--page-size', '101'], 2, '--page-size'],
    [['accounts', 'list', '--page', '-1'], 2, '--page'],
    [['accounts', 'list', '--frobnicate'], 2, 'frobnicate'],
    [['api-keys', 'create', '--account', `acct_${'0'.repeat(26)}`, '--scope', 'validate'], 1, 'No account'],
  ]
  for (const [args, code, message] of cases) {
    const res = await keyward(...args)
    expect([args.join(' '), res.code]).toEqual([args.join(' '), code])
    expect(res.stderr).toContain(message)
    expect(res.stdout).not.toMatch(/kw_/)
  }
})

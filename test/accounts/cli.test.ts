// `bun run keyward …` as a subprocess: against a fresh real-Postgres database when DATABASE_URL is set,
// a temp DATA_DIR otherwise. `accounts create` prints an account id and a token that works.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { useCli } from '../support/cli'
import { client } from '../support/harness'

setDefaultTimeout(120_000)

const { keyward, startNode } = useCli('keyward-cli-')

test('accounts create prints an account id and a working full_access token', async () => {
  const created = await keyward('accounts', 'create', '--name', 'Acme Corp', '--plan', 'growth')
  if (created.code !== 0) throw new Error(`exit ${created.code}: ${created.stdout}${created.stderr}`)
  const accountId = /account_id: (acct_[0-9A-HJKMNP-TV-Z]{26})/.exec(created.stdout)?.[1]
  const token = /token: (kw_[A-Za-z0-9]{32})/.exec(created.stdout)?.[1]
  expect(accountId).toBeDefined()
  expect(token).toBeDefined()
  expect(created.stdout).toContain('plan: growth')

  // a server on the same store accepts the token for that account
  const node = await startNode() // a server on the same store
  try {
    const call = client(node.url)
    const ping = await call('GET', '/v1/ping', { token })
    expect(ping.status).toBe(200)
    expect(ping.body).toEqual({ status: 'ok', accountId, accountName: 'Acme Corp' })
    const keys = await call('GET', '/v1/api-keys', { token })
    expect(keys.body.data).toEqual([expect.objectContaining({ scope: 'full_access' })])
    // growth: no product limit
    for (let i = 0; i < 2; i++) expect((await call('POST', '/v1/products', { token, body: { name: `P${i}`, slug: `p${i}` } })).status).toBe(201)
  } finally {
    await node.stop()
  }
})

test('bad arguments exit 2 with a message and print no token', async () => {
  const noName = await keyward('accounts', 'create', '--plan', 'growth')
  expect(noName.code).toBe(2)
  expect(noName.stderr).toContain('--name')
  const badPlan = await keyward('accounts', 'create', '--name', 'X', '--plan', 'platinum')
  expect(badPlan.code).toBe(2)
  expect(badPlan.stderr).toContain('--plan')
  const unknown = await keyward('frobnicate')
  expect(unknown.code).toBe(2)
  expect(unknown.stderr).toContain('Usage')
  expect(noName.stdout + badPlan.stdout).not.toMatch(/kw_/)
})

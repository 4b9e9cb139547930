// docs/api.md, "API keys": an account's last full_access API key cannot be deleted through /v1/api-keys (409
// last_full_access_key), also when two deletes race for the last two; rotating it is fine.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { AppError } from '../../src/core/errors'
import { statusOf } from '../../src/http/errors'
import { deleteApiKey } from '../../src/modules/api-keys/service'
import { startHarness, type Harness } from '../support/harness'
import { expectProblem } from '../support/helpers'

setDefaultTimeout(60_000)

let h: Harness
beforeAll(async () => {
  h = await startHarness()
}, 60_000)
afterAll(() => h.close())

const fullAccessIds = async (accountId: string) =>
  (
    await h.node.deps.sql<{ id: string }[]>`select id from api_keys
      where account_id = ${accountId} and scope = 'full_access' order by id`
  ).map((r) => r.id)

test('the last full_access key: DELETE is 409 and it keeps working; other scopes do not count', async () => {
  const { id: accountId, token } = await h.account()
  const [defaultKey] = (await h.call('GET', '/v1/api-keys', { token })).body.data
  // a key of another scope does not make the full_access one deletable
  const reader = await h.call('POST', '/v1/api-keys', { token, body: { name: 'reader', scope: 'keys:read' } })
  const refused = expectProblem(await h.call('DELETE', `/v1/api-keys/${defaultKey.id}`, { token }), 409, 'last_full_access_key')
  expect(refused.detail).toContain(defaultKey.id)
  expect((await h.call('GET', '/v1/ping', { token })).status).toBe(200)
  expect(await fullAccessIds(accountId)).toEqual([defaultKey.id])
  // other keys can still be deleted
  expect((await h.call('DELETE', `/v1/api-keys/${reader.body.id}`, { token })).status).toBe(204)
})

test('rotating the last full_access key is fine (the new token works, the old one is 401)', async () => {
  const { token } = await h.account()
  const [only] = (await h.call('GET', '/v1/api-keys', { token })).body.data
  const rotated = await h.call('POST', `/v1/api-keys/${only.id}/rotate`, { token })
  expect(rotated.status).toBe(200)
  expect(rotated.body.id).toBe(only.id)
  expect((await h.call('GET', '/v1/ping', { token })).status).toBe(401)
  expect((await h.call('GET', '/v1/ping', { token: rotated.body.token })).status).toBe(200)
  expectProblem(await h.call('DELETE', `/v1/api-keys/${only.id}`, { token: rotated.body.token }), 409, 'last_full_access_key')
})

test('with two full_access keys one may go (even deleting itself), then the other is the last', async () => {
  const { id: accountId, token } = await h.account()
  const [first] = (await h.call('GET', '/v1/api-keys', { token })).body.data
  const second = await h.call('POST', '/v1/api-keys', { token, body: { name: 'second', scope: 'full_access' } })
  // the first key deletes itself: allowed, another full_access key remains
  expect((await h.call('DELETE', `/v1/api-keys/${first.id}`, { token })).status).toBe(204)
  expect((await h.call('GET', '/v1/ping', { token })).status).toBe(401)
  expectProblem(await h.call('DELETE', `/v1/api-keys/${second.body.id}`, { token: second.body.token }), 409, 'last_full_access_key')
  expect(await fullAccessIds(accountId)).toEqual([second.body.id])
})

test('two parallel deletes of the last two full_access keys leave exactly one (20 accounts at once)', async () => {
  const accounts = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const { id, token } = await h.account()
      const [first] = (await h.call('GET', '/v1/api-keys', { token })).body.data
      const second = await h.call('POST', '/v1/api-keys', { token, body: { name: 'second', scope: 'full_access' } })
      return { id, token, ids: [first.id as string, second.body.id as string], tokens: [token, second.body.token as string] }
    }),
  )
  // Each account: key 1 deletes key 2 while key 2 deletes key 1 (both callers are authenticated before
  // either delete commits), and all 20 accounts race at the same time.
  const results = await Promise.all(
    accounts.map((a) =>
      Promise.all([
        h.call('DELETE', `/v1/api-keys/${a.ids[1]}`, { token: a.tokens[0] }),
        h.call('DELETE', `/v1/api-keys/${a.ids[0]}`, { token: a.tokens[1] }),
      ]),
    ),
  )
  for (const [i, pair] of results.entries()) {
    // One delete wins. The other is refused: 409 when its caller was authenticated before the winner
    // committed, 401 when its caller's own key was the one deleted first.
    const [won, lost] = [...pair].sort((a, b) => a.status - b.status)
    expect(won!.status).toBe(204)
    if (lost!.status === 401) expectProblem(lost!, 401, 'unauthorized')
    else expectProblem(lost!, 409, 'last_full_access_key')
    const left = await fullAccessIds(accounts[i]!.id)
    expect(left).toHaveLength(1)
    // the survivor's token still works
    const survivorToken = accounts[i]!.tokens[accounts[i]!.ids.indexOf(left[0]!)]
    expect((await h.call('GET', '/v1/ping', { token: survivorToken })).status).toBe(200)
  }
})

test('the same race without HTTP in between: of two parallel deletes exactly one commits, the other is 409', async () => {
  // Called below authentication, so both deletes surely run at once (on real Postgres, on two
  // connections): without the lock on the account row each would see two full_access keys and both
  // would commit.
  for (let round = 0; round < 20; round++) {
    const { id: accountId, token } = await h.account()
    const second = await h.call('POST', '/v1/api-keys', { token, body: { name: 'second', scope: 'full_access' } })
    const ids = await fullAccessIds(accountId)
    expect(ids).toHaveLength(2)
    expect(ids).toContain(second.body.id)
    const outcomes = await Promise.allSettled(ids.map((id) => deleteApiKey(h.node.deps, accountId, id, { type: 'api_key', id })))
    const fulfilled = outcomes.filter((o) => o.status === 'fulfilled')
    const rejected = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected')
    expect(fulfilled).toHaveLength(1)
    expect(rejected).toHaveLength(1)
    expect(rejected[0]!.reason).toBeInstanceOf(AppError)
    expect((rejected[0]!.reason as AppError).code).toBe('last_full_access_key')
    expect(statusOf(rejected[0]!.reason as AppError)).toBe(409)
    expect(await fullAccessIds(accountId)).toHaveLength(1)
  }
})

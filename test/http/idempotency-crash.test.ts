// Idempotency-Key across a crash: the stored response is written in the create's own transaction, so
// there is no moment where the resource is committed and its Idempotency-Key record is not. The crash
// is simulated with a trigger (test database only) that makes every finalisation fail unless it runs
// in the transaction that wrote the resource, as if the node had died right after the create's commit; a retry after
// the 60 s abandonment window must then replay, never create a second resource.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'

setDefaultTimeout(30_000)

let h: Harness
beforeAll(async () => {
  h = await startHarness()
  await h.node.deps.sql.unsafe(`
    create function test_no_late_finalisation() returns trigger language plpgsql as $$
    begin
      -- a finalisation after (not within) the transaction that wrote the resource
      if new.status_code is not null and old.status_code is null and not (
        exists (select 1 from products where xmin::text = pg_current_xact_id()::text)
        or exists (select 1 from license_keys where xmin::text = pg_current_xact_id()::text)
        or exists (select 1 from api_keys where xmin::text = pg_current_xact_id()::text)
        or exists (select 1 from webhooks where xmin::text = pg_current_xact_id()::text)
        or exists (select 1 from offline_licenses where xmin::text = pg_current_xact_id()::text)) then
        raise exception 'simulated crash: the node died before finalising the Idempotency-Key';
      end if;
      return new;
    end $$;
    create trigger test_no_late_finalisation before update on idempotency_keys
      for each row execute function test_no_late_finalisation();`)
}, 60_000)
afterAll(() => h.close())

const count = async (table: string, accountId: string) => {
  const sql = h.node.deps.sql
  const [{ n }] = await sql`select count(*)::int as n from ${sql(table)} where account_id = ${accountId}`
  return n as number
}

const FP = 'cd'.repeat(32)
const routes = [
  { name: 'products', table: 'products', path: async () => '/v1/products', body: async () => ({ name: 'Crash', slug: 'crash' }) },
  {
    name: 'keys',
    table: 'license_keys',
    path: async () => '/v1/keys',
    body: async (token: string) => ({ product_id: (await newProduct(h.call, token)).id, plan: 'pro' }),
  },
  { name: 'api-keys', table: 'api_keys', path: async () => '/v1/api-keys', body: async () => ({ name: 'crash', scope: 'validate' }) },
  { name: 'webhooks', table: 'webhooks', path: async () => '/v1/webhooks', body: async () => ({ url: 'https://93.184.215.14/hook', events: ['key.created'] }) },
  {
    name: 'offline licenses',
    table: 'offline_licenses',
    path: async (token: string) => `/v1/keys/${(await newKey(h.call, token, (await newProduct(h.call, token)).id)).id}/offline-licenses`,
    body: async () => ({ device_fingerprint: FP }),
  },
]

for (const route of routes) {
  test(`${route.name}: a crash right after the create's commit, then a retry past the abandonment window, replays`, async () => {
    const { id, token } = await h.account('growth')
    const path = await route.path(token)
    const body = await route.body(token)
    const before = await count(route.table, id)
    const headers = { 'idempotency-key': `crash-${route.name}` }

    const first = await h.call('POST', path, { token, headers, body })
    expect(await count(route.table, id)).toBe(before + 1)

    // the client never saw the answer; it retries after the window in which an unfinished key is taken back
    await h.node.deps.sql`update idempotency_keys set created_at = created_at - interval '61 seconds' where account_id = ${id}`
    const retry = await h.call('POST', path, { token, headers, body })
    expect(await count(route.table, id)).toBe(before + 1)
    expect(retry.status).toBe(201)
    expect(retry.headers.get('idempotent-replayed')).toBe('true')
    // recorded with the create, although no finalisation after it could run: the first answer was whole
    expect(first.status).toBe(201)
    expect(retry.body).toEqual(first.body)
  })
}

test('a request taken back as abandoned while it still runs cannot commit: one create, one answer that replays', async () => {
  const { id, token } = await h.account('growth')
  const sql = h.node.deps.sql
  const headers = { 'idempotency-key': 'slow-first' }
  const body = { url: 'https://93.184.215.14/slow', events: ['key.created'] }
  let release!: () => void
  const held = new Promise<void>((r) => (release = r))
  let locked!: () => void
  const isLocked = new Promise<void>((r) => (locked = r))
  // Hold the account row: the webhook create waits for it inside its transaction (plan limit).
  const holder = sql.begin(async (tx) => {
    await tx`select id from accounts where id = ${id} for no key update` // the key-share lock of a foreign key check still passes
    locked()
    await held
  })
  await isLocked
  const slow = h.call('POST', '/v1/webhooks', { token, headers, body })
  const waitFor = async (pred: () => Promise<boolean>) => {
    for (let i = 0; i < 400 && !(await pred()); i++) await Bun.sleep(25)
    expect(await pred()).toBe(true)
  }
  await waitFor(async () => (await sql`select 1 from idempotency_keys where account_id = ${id}`).length === 1)
  // past the abandonment window, a retry takes the key back and runs (and waits for the row too)
  await sql`update idempotency_keys set created_at = created_at - interval '61 seconds' where account_id = ${id}`
  const retry = h.call('POST', '/v1/webhooks', { token, headers, body })
  await waitFor(async () => (await sql`select 1 from idempotency_keys where account_id = ${id} and created_at > now() - interval '30 seconds'`).length === 1)
  release()
  await holder
  const answers = await Promise.all([slow, retry])
  expect(answers.map((a) => a.status).sort()).toEqual([201, 409])
  expect(await count('webhooks', id)).toBe(1)
  const created = answers.find((a) => a.status === 201)!
  const again = await h.call('POST', '/v1/webhooks', { token, headers, body })
  expect(again.status).toBe(201)
  expect(again.headers.get('idempotent-replayed')).toBe('true')
  expect(again.body).toEqual(created.body)
})

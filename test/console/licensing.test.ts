// The licensing model in the console, in a real Chromium against a real node: policies (create, edit
// with what the edit changes, the keys they govern), entitlements on a policy and on a key (add, remove,
// remove an inherited one), a key's inherited values reset to the policy, a key created with a policy,
// and suspend, reinstate and reissue on the key's page (the new value shown once). Every change is
// checked through the API, and validate answers as the console said it would.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { signedInConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let product: { id: string; name: string }
let policyId: string
const fp = (n: number) => n.toString(16).padStart(64, 'c')

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  product = await newProduct(h.call, acct.token, 'studio')
  c = await signedInConsole(h.node.url, acct.token)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const api = async (method: string, path: string, body?: unknown) => (await h.call(method, path, { token: acct.token, body })).body
const nav = (name: string) => c.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name }).click()
const value = (text: string) => c.page.getByRole('row').filter({ hasText: text })

test('policies: create (errors under their fields), then edit: the form says what the edit changes, and the governed keys follow', async () => {
  const { page } = c
  await nav('Policies')
  await page.getByRole('heading', { name: 'studio' }).waitFor()
  await page.getByText('No policy for studio yet.').waitFor()
  await page.getByRole('button', { name: 'New policy' }).click()
  // The browser refuses what it can tell: no name, a term that is no ISO 8601 period.
  await page.getByLabel('Term (ISO 8601)').fill('1 year')
  await page.getByRole('button', { name: 'Create policy' }).click()
  await page.locator('#new-pol-name-error').waitFor()
  expect(await page.locator('#new-pol-duration-error').textContent()).toContain('P1Y')
  // JSON that is not an object: the server's 400 (body.metadata) lands under the metadata field.
  await page.getByLabel('Name', { exact: true }).fill('Pro, yearly')
  await page.getByLabel('Plan', { exact: true }).fill('pro')
  await page.getByLabel('Devices allowed', { exact: true }).fill('3')
  await page.getByLabel('Term (ISO 8601)').fill('P1Y')
  await page.getByLabel('Metadata (JSON object)').fill('[1]')
  await page.getByRole('button', { name: 'Create policy' }).click()
  await page.locator('#new-pol-meta-error').waitFor()
  expect((await api('GET', `/v1/policies?product_id=${product.id}`)).data).toEqual([])
  await c.shoot('policy-new-error')
  await page.getByLabel('Metadata (JSON object)').fill('')
  await page.getByRole('button', { name: 'Create policy' }).click()
  await page.getByRole('heading', { name: 'Pro, yearly' }).waitFor()
  policyId = page.url().split('/').pop()!
  expect(await api('GET', `/v1/policies/${policyId}`)).toMatchObject({ name: 'Pro, yearly', plan: 'pro', activation_limit: 3, duration: 'P1Y', keys: 0 })
  await page.getByText('No key uses this policy yet.').waitFor()

  // Two keys with the policy: one sets its own plan.
  const a = await newKey(h.call, acct.token, product.id, { policy_id: policyId })
  const b = await newKey(h.call, acct.token, product.id, { policy_id: policyId, plan: 'partner' })
  await page.reload()
  await page.getByRole('link', { name: `Key ${a.key_prefix}…` }).waitFor()
  await page.getByRole('link', { name: `Key ${b.key_prefix}…` }).waitFor()
  expect(await value(`${b.key_prefix}…`).getByText('Plan').count()).toBe(1) // "sets its own: Plan"

  // An edit: more devices (every key at once) and a shorter term (new keys only), said before saving.
  await page.getByLabel('Devices allowed', { exact: true }).fill('5')
  await page.getByLabel('Plan', { exact: true }).fill('pro2')
  await page.getByLabel('Term (ISO 8601)').fill('P1M')
  const impact = page.getByRole('status', { name: 'What this edit changes' })
  await impact.waitFor()
  expect(await impact.textContent()).toContain('Plan, Devices allowed: at once for all 2 keys of this policy')
  expect(await impact.textContent()).toContain('Term: only for keys created from now on')
  await c.shoot('policy-edit')
  const before = await api('GET', `/v1/keys/${a.id}`)
  await page.getByRole('button', { name: 'Save policy' }).click()
  await page.getByText('Saved. Every node uses the new settings').waitFor()
  expect(await api('GET', `/v1/policies/${policyId}`)).toMatchObject({ activation_limit: 5, plan: 'pro2', duration: 'P1M', keys: 2 })
  const after = await api('GET', `/v1/keys/${a.id}`)
  expect(after).toMatchObject({ activation_limit: 5, plan: 'pro2', expires_at: before.expires_at })
  expect((await api('GET', `/v1/keys/${b.id}`)).plan).toBe('partner') // its own value stays
  await page.getByText('0 / 5').first().waitFor() // the governed keys show the new limit

  // The list, per product.
  await nav('Policies')
  await page.getByRole('link', { name: 'Pro, yearly', exact: true }).waitFor()
  await page.getByRole('link', { name: '2 keys of Pro, yearly' }).waitFor()
  await c.shoot('policies')
}, FLOW)

test('a key created in the console with a policy inherits from it', async () => {
  const { page } = c
  await page.goto(`${h.node.url}/console#/policies/${policyId}`)
  await page.getByRole('link', { name: 'New key with this policy' }).click()
  await page.getByRole('form', { name: 'New license key' }).waitFor()
  expect(await page.getByLabel('Policy', { exact: true }).inputValue()).toBe(policyId)
  expect(await page.getByLabel('Devices allowed').getAttribute('placeholder')).toBe('5 (policy)')
  await c.shoot('key-new-policy')
  await page.getByRole('button', { name: 'Create key' }).click()
  await page.getByLabel('License key', { exact: true }).waitFor()
  await page.getByRole('link', { name: 'Open the key' }).click()
  await page.getByRole('heading', { name: /^Key / }).waitFor()
  const id = page.url().split('/').pop()!
  expect(await api('GET', `/v1/keys/${id}`)).toMatchObject({ policy_id: policyId, activation_limit: 5, plan: 'pro2', overrides: {} })
}, FLOW)

test('entitlements: add and remove on a policy; on a key, remove an inherited one, add its own, and reset an override', async () => {
  const { page } = c
  await page.goto(`${h.node.url}/console#/policies/${policyId}`)
  await page.getByRole('heading', { name: 'Entitlements' }).waitFor()
  const add = async (code: string, kind: 'On (true)' | 'Number' | 'Text', v?: string) => {
    await page.getByLabel('Code', { exact: true }).fill(code)
    await page.getByLabel('Kind').selectOption({ label: kind })
    if (v !== undefined) await page.getByLabel('Value', { exact: true }).fill(v)
    await page.getByRole('button', { name: 'Save entitlement' }).click()
  }
  // A code the API would refuse: said under the code, nothing sent.
  await add('Export!', 'On (true)')
  await page.locator('#ent-code-error').waitFor()
  await add('projects', 'Number', 'five')
  await page.locator('#ent-value-error').waitFor()
  await add('export', 'On (true)')
  await page.getByText('export saved').waitFor()
  await add('projects', 'Number', '5')
  await page.getByText('projects saved').waitFor()
  await add('tier', 'Text', 'gold')
  await page.getByText('tier saved').waitFor()
  expect((await api('GET', `/v1/policies/${policyId}`)).entitlements).toEqual({ export: true, projects: 5, tier: 'gold' })
  await c.shoot('policy-entitlements')
  await page.getByRole('button', { name: 'Remove tier' }).click()
  await page.getByText('tier removed').waitFor()
  expect((await api('GET', `/v1/policies/${policyId}`)).entitlements).toEqual({ export: true, projects: 5 })

  // A key of the policy: the inherited codes are listed; removing one sets it null on the key only.
  const key = await newKey(h.call, acct.token, product.id, { policy_id: policyId })
  await page.goto(`${h.node.url}/console#/keys/${key.id}`)
  await page.getByRole('tab', { name: 'Settings' }).click() // entitlements, inherited values and settings are the key page's Settings tab
  await page.getByRole('heading', { name: 'Entitlements' }).waitFor()
  await page.getByRole('button', { name: 'Remove export' }).click()
  await page.getByText('export removed').waitFor()
  let stored = await api('GET', `/v1/keys/${key.id}`)
  expect(stored.entitlements).toEqual({ projects: 5 })
  expect(stored.overrides.entitlements).toEqual({ export: null })
  await add('projects', 'Number', '50')
  await page.getByText('projects saved').waitFor()
  await add('beta', 'On (true)')
  await page.getByText('beta saved').waitFor()
  stored = await api('GET', `/v1/keys/${key.id}`)
  expect(stored.entitlements).toEqual({ projects: 50, beta: true })
  const validate = await h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: fp(1), require_entitlements: ['export'] } })
  expect(validate.body).toMatchObject({ valid: false, reason: 'entitlements_missing', missing: ['export'] })
  await c.shoot('key-entitlements')
  // Back to the policy's value, one code at a time.
  await page.getByRole('button', { name: 'Use the policy’s export' }).click()
  await page.getByText('export: back to the policy’s value').waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).entitlements).toEqual({ export: true, projects: 50, beta: true })

  // Inherited values: an override shows as set on this key, and "Reset to policy" drops it (PATCH reset).
  await page.getByLabel('Devices allowed', { exact: true }).fill('9')
  await page.getByRole('button', { name: 'Save settings' }).click()
  await page.getByText('Settings saved.').waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).overrides).toMatchObject({ activation_limit: 9 })
  const row = page.getByRole('row', { name: /^Devices allowed/ })
  await row.getByText('set on this key').waitFor()
  await c.shoot('key-inherited')
  await page.getByRole('button', { name: 'Reset devices allowed to the policy' }).click()
  await page.getByText('Devices allowed: the policy’s value again.').waitFor()
  stored = await api('GET', `/v1/keys/${key.id}`)
  expect(stored.activation_limit).toBe(5)
  expect(Object.keys(stored.overrides)).toEqual(['entitlements'])
  await page.waitForFunction(() => (document.getElementById('set-limit') as HTMLInputElement).value === '5') // the form follows
  await page.getByRole('button', { name: 'Reset entitlements to the policy' }).click()
  await page.getByText('Entitlements: the policy’s value again.').waitFor()
  expect(await api('GET', `/v1/keys/${key.id}`)).toMatchObject({ overrides: {}, entitlements: { export: true, projects: 5 } })
}, FLOW)

test('suspend, reinstate and reissue on the key page; suspended in the list and its filter', async () => {
  const { page } = c
  const key = await newKey(h.call, acct.token, product.id)
  const check = async (k: string) => (await h.call('POST', '/v1/validate', { token: acct.token, body: { key: k, device_fingerprint: fp(2) } })).body
  expect((await check(key.key_value)).valid).toBe(true)
  await page.goto(`${h.node.url}/console#/keys/${key.id}?tab=lifecycle`)
  await page.getByRole('heading', { name: 'Suspend', exact: true }).waitFor()
  // A past end is refused in the browser, under its field.
  await page.getByLabel('Reinstate automatically at (optional, UTC)').fill('2020-01-01T10:00')
  await page.getByRole('button', { name: 'Suspend key' }).click()
  await page.locator('#susp-until-error').waitFor()
  const until = new Date(Date.now() + 3 * 86_400_000)
  // Typed in UTC, as every date on the key page (its hint says so).
  await page.getByLabel('Reinstate automatically at (optional, UTC)').fill(until.toISOString().slice(0, 16))
  await page.getByLabel('Why (optional)').fill('chargeback')
  await page.getByRole('button', { name: 'Suspend key' }).click()
  await page.getByRole('button', { name: 'Reinstate key' }).waitFor()
  const suspended = await api('GET', `/v1/keys/${key.id}`)
  expect(suspended).toMatchObject({ status: 'suspended', suspend_reason: 'chargeback' })
  expect(Math.abs(Date.parse(suspended.suspended_until) - Math.floor(until.getTime() / 60_000) * 60_000)).toBeLessThan(60_000)
  expect(await check(key.key_value)).toMatchObject({ valid: false, reason: 'suspended' })
  await page.getByRole('main').locator('.page-head .badge.suspended').waitFor()
  await c.shoot('key-suspended')

  // In the list, with its own status filter.
  await nav('License keys')
  await page.getByLabel('Status').selectOption('suspended')
  await page.getByText('1–1 of 1').waitFor()
  await page.getByRole('link', { name: `Key ${key.key_prefix}…` }).waitFor()
  await c.shoot('keys-suspended')
  await page.getByRole('link', { name: `Key ${key.key_prefix}…` }).click()

  await page.getByRole('tab', { name: 'Actions' }).click()
  await page.getByRole('button', { name: 'Reinstate key' }).click()
  await page.getByRole('heading', { name: 'Suspend', exact: true }).waitFor()
  expect((await api('GET', `/v1/keys/${key.id}`)).status).toBe('active')
  expect((await check(key.key_value)).valid).toBe(true)

  // Reissue: the new value once, with a copy button; the old one is unknown at once.
  await page.getByRole('button', { name: 'Reissue key value' }).click()
  const fresh = await page.getByLabel('New license key').inputValue()
  expect(fresh).toMatch(/^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}$/)
  expect(fresh).not.toBe(key.key_value)
  await page.getByRole('button', { name: 'Copy' }).waitFor()
  await page.getByText('The old value no longer works anywhere').waitFor()
  await c.shoot('key-reissued')
  expect((await check(key.key_value)).reason).toBe('not_found')
  expect((await check(fresh)).valid).toBe(true)
  await page.getByRole('heading', { name: `Key ${fresh.slice(0, 5)}…` }).waitFor()
  // Shown once: after a reload the page has no value to show.
  await page.reload()
  await page.getByRole('button', { name: 'Reissue key value' }).waitFor() // the tab is in the address: a reload keeps it
  expect(await page.getByLabel('New license key').count()).toBe(0)
  expect(c.errors.filter((e) => !/status of 4\d\d/.test(e))).toEqual([])
}, FLOW)

test('deleting a policy that keys still use is refused in words; every request stayed on the node', async () => {
  const { page } = c
  await page.goto(`${h.node.url}/console#/policies/${policyId}`)
  await page.getByRole('button', { name: 'Delete policy' }).click()
  await page.getByText('Keys still use Pro, yearly').waitFor()
  expect((await h.call('GET', `/v1/policies/${policyId}`, { token: acct.token })).status).toBe(200)
  const origin = new URL(h.node.url).origin
  expect(c.requests.filter((u) => !u.startsWith('blob:') && !u.startsWith('data:') && new URL(u).origin !== origin)).toEqual([])
}, FLOW)

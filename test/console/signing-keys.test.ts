// The Signing keys page in a real Chromium against a real node: the root shown as the API serves it,
// a key created, one scheduled, one activated now, the active one revoked through the confirmation
// (which says what stops verifying), each step read back from the API and seen in the list; the 409 of
// a seventeenth key shown in words; and a token without full_access that reads the keys but is told,
// not failed, when it tries to change them. Screenshots at 1280 and 390 px, light and dark.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { scopedToken, startHarness, type Harness } from '../support/harness'
import { KEY_LIMIT } from '../../src/console/app/pages/signing-keys'
import { MAX_UNREVOKED_KEYS } from '../../src/modules/signing/model'
import { openConsole, type Console } from './browser'

const FLOW = 90_000
let h: Harness
let c: Console
let acct: { id: string; token: string }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth')
  await fetch(h.node.url + '/console') // the first request bundles the console
  c = await openConsole(h.node.url)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const nav = (name: string) => c.page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name }).click()

async function signIn(token: string) {
  await c.page.goto(h.node.url + '/console')
  await c.page.getByLabel('Token').fill(token)
  await c.page.getByRole('button', { name: 'Sign in' }).click()
  await c.page.getByRole('navigation', { name: 'Console' }).waitFor()
}

/** The key set as the API serves it to the signed-in account. */
const keySet = async (token = acct.token) => {
  const res = await h.call('GET', '/v1/signing-keys', { token })
  expect(res.status).toBe(200)
  return res.body as { root: { kid: string; public_key: string }; keys: { kid: string; state: string; activated_at: string | null; revoked_at: string | null }[] }
}
const stateOf = async (kid: string) => (await keySet()).keys.find((k) => k.kid === kid)?.state

/** The row of a key in the page's table, found by its kid. */
const row = (kid: string) => c.page.locator('table.signing-keys tbody tr', { hasText: kid })
/** Waits until the key's row shows this state (the list reloads after the page's confirmation line). */
const shows = (kid: string, state: string) => row(kid).locator('.badge', { hasText: new RegExp(`^${state}$`) }).waitFor()

/** `YYYY-MM-DDTHH:MM` of a moment in UTC, as the page's "Activate at (UTC)" field takes it. */
const utcInput = (d: Date) => d.toISOString().slice(0, 16)

test('the console states the same key limit as the server', () => {
  expect(KEY_LIMIT).toBe(MAX_UNREVOKED_KEYS)
})

test('the root as the API serves it, with no signing key yet: the root signs', async () => {
  const { page } = c
  await signIn(acct.token)
  await nav('Signing keys')
  await page.getByRole('heading', { name: 'Signing keys', level: 1 }).waitFor()
  const set = await keySet()
  // The root is the account's existing key: the one GET /v1/offline/public-key has always served.
  const pinned = (await h.call('GET', '/v1/offline/public-key', { token: acct.token })).body
  expect(set.root.kid).toBe(pinned.kid)
  expect(set.root.public_key).toBe(pinned.public_key)
  expect(await page.locator('#sk-root-public-key').textContent()).toBe(set.root.public_key)
  await page.getByText(set.root.kid, { exact: true }).waitFor()
  await page.getByText('signed by the root: no signing key is active').waitFor()
  await page.getByText('No signing key yet').waitFor()
}, FLOW)

test('create, schedule, activate now, revoke through the confirmation: the list reflects each state', async () => {
  const { page } = c
  // Create: pending until activated.
  await page.getByRole('button', { name: 'New signing key' }).click()
  await page.getByRole('button', { name: 'Create signing key' }).click()
  await page.getByText(/created: pending until you activate it/).waitFor()
  const [first] = (await keySet()).keys
  expect(first!.state).toBe('pending')
  await shows(first!.kid, 'pending')
  expect(await row(first!.kid).getByRole('button', { name: `Activate now: ${first!.kid}` }).count()).toBe(1)

  // A moment already past is refused under its field, before anything is asked.
  await page.getByRole('button', { name: 'New signing key' }).click()
  await page.getByLabel('Activate at (optional, UTC)').fill(utcInput(new Date(Date.now() - 3600_000)))
  await page.getByRole('button', { name: 'Create signing key' }).click()
  await page.locator('#sk-activate-at-error').waitFor()
  expect((await keySet()).keys.length).toBe(1)

  // Schedule: pending, with the moment it takes over (in UTC, as the field took it).
  const at = new Date(Date.now() + 3 * 86400_000)
  at.setUTCSeconds(0, 0)
  await page.getByLabel('Activate at (optional, UTC)').fill(utcInput(at))
  await page.getByRole('button', { name: 'Create signing key' }).click()
  await page.getByText(/created: it becomes active at/).waitFor()
  const scheduled = (await keySet()).keys.find((k) => k.kid !== first!.kid)!
  expect(scheduled.state).toBe('pending')
  const shown = await page.evaluate((iso) => new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' }).format(new Date(iso)), at.toISOString())
  await row(scheduled.kid).getByText('Scheduled for').waitFor()
  expect(await row(scheduled.kid).textContent()).toContain(shown)
  await page.getByText(new RegExp(`Key ${scheduled.kid} takes over at`)).waitFor()

  // Activate the first one now: it signs on every node from the moment the call returned.
  await row(first!.kid).getByRole('button', { name: `Activate now: ${first!.kid}` }).click()
  await page.getByText(`Key ${first!.kid} is active: every node signs with it from now on.`).waitFor()
  await page.waitForFunction((kid) => document.querySelector('.signer')?.textContent?.includes(`signed by key ${kid}`), first!.kid)
  await shows(first!.kid, 'active')
  expect(await stateOf(first!.kid)).toBe('active')
  expect((await keySet()).keys.find((k) => k.kid === first!.kid)!.activated_at).not.toBeNull()
  await c.shoot('signing-keys')

  // Revoke it: the confirmation says what stops verifying, for whom, and that the root signs again.
  await row(first!.kid).getByRole('button', { name: `Revoke: ${first!.kid}` }).click()
  const dialog = page.getByRole('dialog', { name: 'Revoke this signing key?' })
  await dialog.waitFor()
  const words = (await dialog.textContent())!
  expect(words).toContain(first!.kid)
  expect(words).toContain('Licenses and answers signed by this key stop verifying')
  expect(words).toContain('Apps that are offline keep trusting it until they refresh')
  expect(words).toContain('the root signs answers and licenses, until you activate another key')
  await c.shoot('signing-keys-revoke', { viewport: true })
  // Cancel changes nothing.
  await dialog.getByRole('button', { name: 'Cancel' }).click()
  await dialog.waitFor({ state: 'hidden' })
  expect(await stateOf(first!.kid)).toBe('active')
  // Confirmed, with a reason.
  await row(first!.kid).getByRole('button', { name: `Revoke: ${first!.kid}` }).click()
  await dialog.getByLabel('Reason (optional)').fill('rotation drill')
  await dialog.getByRole('button', { name: 'Revoke key' }).click()
  await page.getByText(`Key ${first!.kid} is revoked. The root signs again until you activate another key.`).waitFor()
  await shows(first!.kid, 'revoked')
  expect(await stateOf(first!.kid)).toBe('revoked')
  expect((await keySet()).keys.find((k) => k.kid === first!.kid)!.revoked_at).not.toBeNull()
  await page.getByText('signed by the root: no signing key is active').waitFor()
  // A revoked key offers nothing more: it cannot be activated again.
  expect(await row(first!.kid).getByRole('button').count()).toBe(0)

  // The scheduled one activated now instead; a revoked key stays revoked beside it.
  await row(scheduled.kid).getByRole('button', { name: `Activate now: ${scheduled.kid}` }).click()
  await page.getByText(`Key ${scheduled.kid} is active: every node signs with it from now on.`).waitFor()
  await shows(scheduled.kid, 'active')
  expect(await stateOf(scheduled.kid)).toBe('active')
  expect(await row(scheduled.kid).getByText('Scheduled for').count()).toBe(0)

  // Another key activated: the one before it is retired (it still verifies) and may be activated again.
  await page.getByRole('button', { name: 'New signing key' }).click()
  await page.getByRole('button', { name: 'Create signing key' }).click()
  await page.getByText(/created: pending until you activate it/).waitFor()
  const third = (await keySet()).keys.find((k) => k.state === 'pending')!
  await row(third.kid).getByRole('button', { name: `Activate now: ${third.kid}` }).click()
  await page.getByText(`Key ${third.kid} is active: every node signs with it from now on.`).waitFor()
  await shows(scheduled.kid, 'retired')
  expect(await stateOf(scheduled.kid)).toBe('retired')
  expect(await row(scheduled.kid).getByRole('button', { name: `Activate again: ${scheduled.kid}` }).count()).toBe(1)
  await c.shoot('signing-keys-states')

  // A scheduled activation happens by itself: once its moment has passed, the list shows the key
  // active (with that moment as its activation) and the one before it retired.
  const soon = new Date(Date.now() + 2_000).toISOString()
  const due = await h.call('POST', '/v1/signing-keys', { token: acct.token, body: { activate_at: soon } })
  expect(due.status).toBe(201)
  while ((await stateOf(due.body.kid)) !== 'active') await page.waitForTimeout(250)
  await page.reload()
  await shows(due.body.kid, 'active')
  await shows(third.kid, 'retired')
  expect(await row(due.body.kid).locator('time').nth(1).getAttribute('datetime')).toBe((await keySet()).keys.find((k) => k.kid === due.body.kid)!.activated_at)
}, FLOW)

test('a seventeenth key not revoked: the 409 in words, and nothing created', async () => {
  const { page } = c
  const before = await keySet()
  const unrevoked = before.keys.filter((k) => k.state !== 'revoked').length
  for (let i = unrevoked; i < KEY_LIMIT; i++) expect((await h.call('POST', '/v1/signing-keys', { token: acct.token, body: {} })).status).toBe(201)
  await page.reload()
  await page.getByText(`${KEY_LIMIT} of ${KEY_LIMIT} in use`).waitFor()
  await page.getByRole('button', { name: 'New signing key' }).click()
  await page.getByRole('button', { name: 'Create signing key' }).click()
  const alert = page.getByRole('form', { name: 'New signing key' }).getByRole('alert')
  await alert.waitFor()
  // The page says what the API says: the same request from outside is the 409 signing_key_limit.
  const refused = await h.call('POST', '/v1/signing-keys', { token: acct.token, body: {} })
  expect(refused.status).toBe(409)
  expect(refused.body.code).toBe('signing_key_limit')
  expect(await alert.textContent()).toBe(refused.body.detail)
  expect((await keySet()).keys.length).toBe(before.keys.length + KEY_LIMIT - unrevoked)
  await page.getByRole('button', { name: 'Cancel' }).click()
}, FLOW)

test('a token without full_access reads the keys, and is told (not failed) when it tries to change them', async () => {
  const { page } = c
  const narrow = await scopedToken(h.call, acct.token, 'validate')
  const set = await keySet(narrow)
  await page.getByRole('button', { name: 'Sign out' }).click()
  await signIn(narrow)
  await nav('Signing keys')
  await page.getByText(set.root.kid, { exact: true }).waitFor()
  await row(set.keys[0]!.kid).waitFor()
  await page.getByRole('button', { name: 'New signing key' }).click()
  await page.getByRole('button', { name: 'Create signing key' }).click()
  await page.getByRole('heading', { name: /Changing signing keys needs the full_access scope/ }).waitFor()
  // Read-only from then on: no control that would change a key is offered.
  expect(await page.getByRole('button', { name: /^(New signing key|Activate|Revoke)/ }).count()).toBe(0)
  expect((await keySet()).keys.length).toBe(set.keys.length)
  await c.shoot('signing-keys-read-only')
}, FLOW)

test('every request went to the node itself, and no page logged an error', () => {
  const origin = new URL(h.node.url).origin
  const foreign = c.requests.filter((u) => !u.startsWith('blob:') && !u.startsWith('data:') && new URL(u).origin !== origin)
  expect(foreign).toEqual([])
  const api = [...new Set(c.requests.map((u) => new URL(u)).filter((u) => u.pathname.startsWith('/v1/signing-keys')).map((u) => u.pathname.replace(/[0-9a-f]{32}/, ':kid')))].sort()
  expect(api).toEqual(['/v1/signing-keys', '/v1/signing-keys/:kid/activate', '/v1/signing-keys/:kid/revoke'])
  expect(c.errors.filter((e) => !/status of 4\d\d/.test(e))).toEqual([])
})

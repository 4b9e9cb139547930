// The key page's relays in a real Chromium against a real node: each relay with its seats, its peak
// use from its check-ins, its last check-in and its license's expiry; a delete through the
// confirmation, read back from the API (the seats return to the key). Screenshots at 1280 and 390 px,
// light and dark.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { fingerprint, newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { requireChromium } from '../support/environment'
import { checkIn, createRelay, payloadOf, relayIdentity, requestCode } from '../support/relays'
import { openConsole, SHOTS_DIR, type Console } from './browser'

const FLOW = 90_000
const ready = await requireChromium('console/relays')
let h: Harness
let c: Console
let acct: { id: string; token: string }

beforeAll(async () => {
  if (!ready) return
  h = await startHarness()
  acct = await h.account('growth')
  await fetch(h.node.url + '/console') // the first request bundles the console
  c = await openConsole(h.node.url)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

test.if(ready)('the key page lists its relays with their use; delete returns the seats', async () => {
  const product = await newProduct(h.call, acct.token)
  const key = await newKey(h.call, acct.token, product.id, { activation_limit: 12 })
  await h.call('POST', '/v1/validate', { token: acct.token, body: { key: key.key_value, device_fingerprint: fingerprint(), device_name: 'Front desk' } })
  const lab = relayIdentity('CAD lab, building 2')
  const labMade = await createRelay(h.call, acct.token, key.id, { request: requestCode(lab), seats: 6 })
  const floor = relayIdentity('Factory floor')
  const floorMade = await createRelay(h.call, acct.token, key.id, { request: requestCode(floor), seats: 3, lease_seconds: 300 })
  const lease = (name: string) => ({ device_fingerprint: fingerprint(), device_name: name, since: new Date().toISOString() })
  const checked = await checkIn(h.call, lab, labMade.body.relay_id, payloadOf(labMade.body.relay_license).id, {
    leases: [lease('ws-01'), lease('ws-02'), lease('ws-03')],
    peak: 5,
  })
  expect(checked.body.status).toBe('valid')

  const { page } = c
  await page.goto(h.node.url + '/console')
  await page.getByLabel('Token').fill(acct.token)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('navigation', { name: 'Console' }).waitFor()
  await page.goto(`${h.node.url}/console#/keys/${key.id}`)
  const section = page.locator('section', { has: page.getByRole('heading', { name: /^Relays/ }) })
  await section.waitFor()
  await section.getByText('(9 of 12 seats)').waitFor()
  const labRow = section.locator('tbody tr', { hasText: 'CAD lab, building 2' })
  await labRow.waitFor()
  expect((await labRow.locator('td').nth(1).textContent())?.trim()).toBe('6')
  expect(await labRow.locator('td').nth(2).textContent()).toContain('5 of 6')
  expect(await labRow.locator('td').nth(0).textContent()).toContain('Checked in')
  const floorRow = section.locator('tbody tr', { hasText: 'Factory floor' })
  expect(await floorRow.locator('td').nth(0).textContent()).toContain('Never checked in')
  await page.getByText('10 of 12').first().waitFor() // the key's seats: one device and nine relay seats
  await c.settled()
  await c.shoot('key-relays')
  // the section alone, legible at each width and scheme
  for (const width of [1280, 390]) {
    for (const scheme of ['light', 'dark'] as const) {
      await page.setViewportSize({ width, height: width > 500 ? 900 : 844 })
      await page.emulateMedia({ colorScheme: scheme })
      await page.waitForTimeout(100)
      await section.screenshot({ path: `${SHOTS_DIR}key-relays-section-${width}-${scheme}.png` })
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 })
  await page.emulateMedia({ colorScheme: 'light' })

  await floorRow.getByRole('button', { name: 'Delete relay Factory floor' }).click()
  await section.getByText('(6 of 12 seats)').waitFor()
  await floorRow.waitFor({ state: 'detached' })
  const listed = await h.call('GET', `/v1/keys/${key.id}/relays`, { token: acct.token })
  expect(listed.body.data.map((r: { id: string }) => r.id)).toEqual([labMade.body.relay_id])
  expect((await h.call('GET', `/v1/keys/${key.id}`, { token: acct.token })).body.activations_used).toBe(7)
  expect(floorMade.status).toBe(201)
  expect(c.errors).toEqual([])
  expect(c.requests.every((u) => u.startsWith(h.node.url) || u.startsWith('data:') || u.startsWith('blob:'))).toBe(true)
}, FLOW)

// Machine identity in the console, in a real Chromium against a real node (docs/integrating.md,
// "Identifying machines"): the policy form sets component_match (with its sentence on which rule fits
// what) and the key follows it; the key page sets its own rule; devices that validated with components
// show their names (never the hashes) and since when each is unchanged; a reinstall's rebind and a
// clone's refusal appear in the device history (the rebind from activation.rebound, the refusals
// counted by the validation analytics). Every change is read back through the API. Screenshots at 1280
// and 390 px, light and dark.
import { createHash } from 'node:crypto'
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { newKey, newProduct, startHarness, type Harness } from '../support/harness'
import { until } from '../support/wait'
import { signedInConsole, type Console } from './browser'

const FLOW = 120_000
let h: Harness
let c: Console
let acct: { id: string; token: string }
let product: { id: string; name: string }
const hx = (ch: string) => ch.repeat(64)
const fp = (n: number) => createHash('sha256').update(`device ${n}`).digest('hex') // prefixes that differ, as on the page
const S = { machine_id: hx('1'), disk: hx('2'), mac: hx('3'), cpu: hx('4'), hostname: hx('5') }

beforeAll(async () => {
  h = await startHarness()
  acct = await h.account('growth') // the validation analytics (refused copies) are on paid plans
  product = await newProduct(h.call, acct.token, 'cad-suite')
  c = await signedInConsole(h.node.url, acct.token)
}, FLOW)
afterAll(async () => {
  await c?.close()
  await h?.close()
}, 30_000)

const api = async (method: string, path: string, body?: unknown) => (await h.call(method, path, { token: acct.token, body })).body
const validate = (key: string, device: string, components?: Record<string, string>, name?: string) =>
  h.call('POST', '/v1/validate', { body: { key, device_fingerprint: device, ...(components ? { components } : {}), ...(name ? { device_name: name } : {}) }, token: acct.token })

test('policy form: the machine match rule with its sentence; a key of the policy follows it', async () => {
  const { page } = c
  await page.goto(`${h.node.url}/console#/policies?product=${product.id}`)
  await page.getByRole('button', { name: 'New policy' }).click()
  await page.getByLabel('Name', { exact: true }).fill('Workstation')
  const select = page.getByLabel('Machine match')
  expect(await select.locator('option').allTextContents()).toEqual([
    'Off: the fingerprint alone decides', 'Any: one part in common', 'Two: two parts in common', 'Most: more than half of the parts', 'All: every part, unchanged',
  ])
  await page.getByText('Most fits desktops and laptops').waitFor()
  await select.selectOption('most')
  await page.getByRole('button', { name: 'Create policy' }).click()
  await page.getByRole('heading', { name: 'Workstation', level: 1 }).waitFor()
  const policies = (await api('GET', `/v1/policies?product_id=${product.id}`)).data
  expect(policies).toHaveLength(1)
  expect(policies[0].component_match).toBe('most')
  await page.getByText('Most: more than half of the parts').first().waitFor()
  const k = await newKey(h.call, acct.token, product.id, { policy_id: policies[0].id })
  expect((await api('GET', `/v1/keys/${k.id}`)).component_match).toBe('most')
}, FLOW)

test('key page: the key sets its own rule over its policy\'s; saved on every node, read back through the API', async () => {
  const { page } = c
  const policy = (await api('GET', `/v1/policies?product_id=${product.id}`)).data[0]
  const k = await newKey(h.call, acct.token, product.id, { policy_id: policy.id })
  await page.goto(`${h.node.url}/console#/keys/${k.id}`)
  const panel = page.locator('section', { has: page.getByRole('heading', { name: 'Machine identity' }) })
  await panel.getByText('Rule: Most: more than half of the parts').waitFor()
  await panel.getByText('From the policy: a change sets it on this key only.').waitFor()
  await panel.getByText('No device yet: components appear here once a device validates.').waitFor()
  await panel.getByLabel('Machine match (component_match)').selectOption('all')
  await panel.getByRole('button', { name: 'Save rule' }).click()
  await panel.getByText('Rule: All: every part, unchanged').waitFor()
  const detail = await api('GET', `/v1/keys/${k.id}`)
  expect(detail.component_match).toBe('all')
  expect(Object.keys(detail.overrides)).toContain('component_match')
  await panel.getByText('Set on this key.').waitFor()
  expect(c.errors).toEqual([])
}, FLOW)

test('key page: components per device by name, a rebind and refused copies in the history', async () => {
  const { page } = c
  const k = await newKey(h.call, acct.token, product.id, { activation_limit: 2, component_match: 'most' })
  // A workstation, then its reinstall (new machine id and fingerprint: a rebind), then a clone of it
  // (the reinstall's fingerprint, other disk, MAC and host name: refused), and a second machine.
  expect((await validate(k.key_value, fp(1), S, 'Design workstation')).body).toMatchObject({ valid: true })
  const reinstalled = { ...S, machine_id: hx('6') }
  expect((await validate(k.key_value, fp(2), reinstalled)).body).toMatchObject({ valid: true, activations_used: 1 })
  expect((await validate(k.key_value, fp(2), { machine_id: hx('6'), disk: hx('7'), mac: hx('8'), cpu: hx('4'), hostname: hx('9') })).body).toMatchObject({ valid: false, reason: 'device_mismatch' })
  expect((await validate(k.key_value, fp(3), { machine_id: hx('a'), cpu: hx('4'), hostname: hx('b') }, 'Laptop')).body).toMatchObject({ valid: true, activations_used: 2 })
  const detail = await api('GET', `/v1/keys/${k.id}`)
  const workstation = detail.activations.find((a: { device_fingerprint: string }) => a.device_fingerprint === fp(2))
  expect(workstation).toMatchObject({ device_name: 'Design workstation', components: reinstalled, replaced_fingerprints: [fp(1)] })
  // The refusal is counted by the analytics (written every FLUSH_INTERVAL_MS).
  await until(() => api('GET', `/v1/analytics/validations?product_id=${product.id}&range=7d`), (days) => days.at(-1)?.device_mismatch === 1, 20_000)

  await page.goto(`${h.node.url}/console#/keys/${k.id}`)
  const panel = page.locator('section', { has: page.getByRole('heading', { name: 'Machine identity' }) })
  await panel.waitFor()
  await c.settled()
  const parts = panel.getByRole('list', { name: 'Components of Design workstation' })
  expect(await parts.locator('.chip').allTextContents()).toEqual(['Machine id', 'Disk', 'Network cards', 'CPU', 'Host name'])
  expect(await parts.getByText(/^since /).count()).toBe(5)
  expect(await panel.getByRole('list', { name: 'Components of Laptop' }).locator('.chip').allTextContents()).toEqual(['Machine id', 'CPU', 'Host name'])
  // Names, never hashes.
  const text = (await panel.textContent()) ?? ''
  for (const hash of [...Object.values(S), hx('6'), hx('a')]) expect(text.includes(hash)).toBe(false)
  await panel.getByText('Earlier fingerprints (refused from now on)').waitFor()
  const rebinds = panel.getByRole('list', { name: 'Rebinds' })
  expect(await rebinds.locator('li').count()).toBe(1)
  expect(await rebinds.textContent()).toContain(`moved from ${fp(1).slice(0, 12)}… to ${fp(2).slice(0, 12)}…`)
  expect(await panel.getByTestId('refused-copies').textContent()).toContain('1 validate was refused as a copy (device_mismatch)')
  expect(c.errors).toEqual([])
  await c.shoot('key-machine-identity')

  // The key's own rule: all; validate now refuses the drifted set.
  await panel.getByLabel('Machine match (component_match)').selectOption('all')
  await panel.getByRole('button', { name: 'Save rule' }).click()
  await panel.getByText('Rule: All: every part, unchanged').waitFor()
  expect((await api('GET', `/v1/keys/${k.id}`)).component_match).toBe('all')
  expect((await validate(k.key_value, fp(2), { ...reinstalled, hostname: hx('c') })).body).toMatchObject({ valid: false, reason: 'device_mismatch' })
  // The activity page names the rebind with the fingerprint it replaced.
  await page.goto(`${h.node.url}/console#/activity?resource_id=${k.id}`)
  await page.getByText(`(was ${fp(1).slice(0, 12)}…)`).waitFor()
  expect(c.errors).toEqual([])
}, FLOW)

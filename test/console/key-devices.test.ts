// sinceByComponent (src/console/app/pages/key-devices.ts): since when each of a device's components is
// unchanged, from the activation and rebind events and the activation's components_changed_at.
import { expect, test } from 'bun:test'
import { sinceByComponent, type IdentifiedActivation } from '../../src/console/app/pages/key-devices'

const h = (c: string) => c.repeat(64)
const base: IdentifiedActivation = {
  id: 'act_1', device_fingerprint: h('f'), device_name: null, app_version: null, country: null, status: 'active',
  activated_at: '2026-01-01T00:00:00.000Z', last_validated_at: null, deactivated_at: null, deactivation_reason: null,
  components: null, components_changed_at: null, replaced_fingerprints: [], offline: false,
}
const event = (type: string, created_at: string, components: Record<string, string> | null, id = 'act_1') => ({ type, created_at, data: { activation: { ...base, id, components } } })

test('unchanged since activation, since a rebind, or since the set last changed', () => {
  const a = { ...base, components: { machine_id: h('1'), disk: h('9'), cpu: h('3') }, components_changed_at: '2026-03-01T00:00:00.000Z' }
  const events = [
    event('activation.created', '2026-01-01T00:00:01.000Z', { machine_id: h('0'), disk: h('2'), cpu: h('3') }),
    event('activation.rebound', '2026-02-01T00:00:00.000Z', { machine_id: h('1'), disk: h('2'), cpu: h('3') }),
    event('activation.created', '2026-01-05T00:00:00.000Z', { machine_id: h('1'), disk: h('9'), cpu: h('3') }, 'act_other'),
  ]
  expect(sinceByComponent(a, events)).toEqual({
    cpu: '2026-01-01T00:00:00.000Z', // the same since the activation: its activated_at
    machine_id: '2026-02-01T00:00:00.000Z', // new at the rebind
    disk: '2026-03-01T00:00:00.000Z', // drifted after the rebind: when the set last changed
  })
})

test('no events (or a node that keeps none): every component since the set last changed, else the activation', () => {
  expect(sinceByComponent({ ...base, components: { cpu: h('3') }, components_changed_at: '2026-04-01T00:00:00.000Z' }, [])).toEqual({ cpu: '2026-04-01T00:00:00.000Z' })
  expect(sinceByComponent({ ...base, components: { cpu: h('3') } }, [])).toEqual({ cpu: '2026-01-01T00:00:00.000Z' })
  expect(sinceByComponent({ ...base, components: null }, [])).toEqual({})
})

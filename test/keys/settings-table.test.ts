// The settings a key may set itself are declared once (core/key-settings.ts): every place that lists
// a key's fields by name must list each of them, so a new row of the table cannot be forgotten there.
import { expect, test } from 'bun:test'
import { formProblem, KEY_SETTINGS, OVERRIDABLE, SCALAR_OWN } from '../../src/core/key-settings'
import { ROW_FIELDS } from '../../src/modules/keys/import-parse'
import { CSV_COLUMNS } from '../../src/modules/keys/export-service'
import { checks } from '../../src/console/app/settings'

test('import rows and export columns carry every setting a key may set itself', () => {
  for (const field of OVERRIDABLE) {
    expect(ROW_FIELDS as readonly string[]).toContain(field)
    expect(CSV_COLUMNS as readonly string[]).toContain(field)
  }
  expect(SCALAR_OWN.map((s) => s.field).sort()).toEqual(OVERRIDABLE.filter((f) => f !== 'entitlements').sort())
})

test("each setting's form: what it accepts and the message for what it does not", () => {
  const form = (field: string) => KEY_SETTINGS.find((s) => s.field === field)!.form
  expect(formProblem(form('activation_limit'), 1)).toBeNull()
  expect(formProblem(form('activation_limit'), 10_000)).toBeNull()
  expect(formProblem(form('activation_limit'), 0)).toBe('must be an integer 1..10000')
  expect(formProblem(form('activation_limit'), 2.5)).toBe('must be an integer 1..10000')
  expect(formProblem(form('release_after_seconds'), 59)).toBe('must be an integer 60..31536000')
  expect(formProblem(form('after_expiry'), 'keep')).toBeNull()
  expect(formProblem(form('after_expiry'), 'KEEP')).toBe('must be one of: refuse, keep')
  expect(formProblem(form('component_match'), 'most')).toBeNull()
  expect(formProblem(form('component_match'), 'some')).toBe('must be one of: off, any, two, most, all')
  expect(formProblem(form('plan'), 'x'.repeat(64))).toBeNull()
  expect(formProblem(form('plan'), 'x'.repeat(65))).toBe('must be text of 0..64 characters, no control characters')
  expect(formProblem(form('plan'), 'pro\u0085')).not.toBeNull()
  expect(formProblem(form('one_key_per_device'), 'yes')).toBe('must be true or false')
})

test("the console's form checks use the table's ranges", () => {
  expect(checks.limit('10000', 'f')).toBeNull()
  expect(checks.limit('10001', 'f')).toEqual({ field: 'f', message: 'A whole number from 1 to 10000.' })
  expect(checks.release(59, 'f')).toEqual({ field: 'f', message: 'From 1 minute to 365 days, or empty for never.' })
  expect(checks.release(null, 'f')).toBeNull()
  expect(checks.deactivations(10_001, 'f')).toEqual({ field: 'f', message: 'A whole number from 0 to 10000, or empty for unlimited.' })
  expect(checks.grace(31_536_001, 'f')).toEqual({ field: 'f', message: 'From 0 to 365 days.' })
})

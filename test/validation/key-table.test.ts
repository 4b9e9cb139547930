// The packed key table against a plain Map doing the same operations: what it finds, what it answers
// for each entry, the bound, and that entries made stale by a change say so (their generation moved).
import { expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { NO_ENTITLEMENTS } from '../../src/modules/validation/hot/key-row'
import { KeyTable, type PackedRow } from '../../src/modules/validation/hot/key-table'
import { digestWords } from '../../src/modules/validation/hot/packed-digests'

const fp = () => randomBytes(32).toString('hex')
const digest = () => randomBytes(32).toString('base64')

function row(over: Partial<PackedRow> = {}): PackedRow {
  return {
    accountId: `acct_${Math.floor(Math.random() * 5)}`, productId: 'prod_1', status: 'active', plan: null, expiresAt: null, limit: 3,
    devices: [fp()], entitlements: NO_ENTITLEMENTS, graceMs: 0, keep: false, policyId: null, own: null, oneKeyPerDevice: false, metered: false, relaySeats: 0,
    ...over,
  }
}

const asRead = (r: PackedRow) => {
  const d = r.devices
  return { ...r, devices: typeof d === 'string' || d.length !== 1 ? d : d[0] }
}

test('digests decode to their bytes', () => {
  const words = new Int32Array(8)
  for (let i = 0; i < 1000; i++) {
    const bytes = randomBytes(32)
    digestWords(bytes.toString('base64'), words)
    expect(Buffer.from(new Int32Array(words.map((w) => ((w >>> 24) | ((w >>> 8) & 0xff00) | ((w & 0xff00) << 8) | (w << 24)))).buffer)).toEqual(bytes)
  }
})

// 500: within the columns' first room; 3,000: the columns double twice as entries are handed out.
for (const [cap, distinct] of [[500, 2000], [3000, 8000]] as const)
test(`random puts, changes and deletes: the same answers as a Map, within the bound (${cap} entries)`, () => {
  const table = new KeyTable(cap)
  const model = new Map<string, PackedRow>()
  const keys = Array.from({ length: distinct }, digest)
  for (let step = 0; step < 20_000; step++) {
    const key = keys[Math.floor(Math.random() * keys.length)]
    const op = Math.random()
    if (op < 0.5) {
      const r = row({
        status: (['active', 'revoked', 'suspended', 'expired'] as const)[step % 4],
        plan: step % 3 ? 'pro' : null,
        expiresAt: step % 5 ? Date.now() + step : null,
        limit: step % 7,
        devices: step % 6 === 0 ? [] : step % 6 === 1 ? [fp(), fp(), fp()] : step % 6 === 2 ? ['not-hex'] : step % 6 === 3 ? [fp(), 'not-hex'] : [fp()],
        entitlements: step % 4 === 0 ? Object.freeze({ pro: true as const }) : NO_ENTITLEMENTS,
        graceMs: step % 2 ? 86_400_000 : 0,
        keep: step % 3 === 0,
        policyId: step % 5 === 0 ? 'pol_1' : null,
        own: step % 5 === 0 ? { entitlements: {} } : null,
        oneKeyPerDevice: step % 2 === 0,
        metered: step % 3 === 1,
      })
      if (table.size === cap && !model.has(key)) {
        // the table evicts one entry: find which in the model
        table.set(key, r, step)
        for (const k of model.keys()) if (table.find(k) < 0) model.delete(k)
      } else table.set(key, r, step)
      model.set(key, r)
    } else if (op < 0.7) {
      expect(table.delete(key)).toBe(model.delete(key))
    } else if (op < 0.8) {
      const e = table.find(key)
      const d = step % 9 === 0 ? `not-hex-${step}` : step % 11 === 0 ? fp().toUpperCase() : fp()
      if (e >= 0) {
        const before = table.gen[e]
        expect(table.addDevice(e, d)).toBe(true)
        expect(table.gen[e]).not.toBe(before)
        const r = model.get(key)!
        const list = typeof r.devices === 'string' ? [r.devices] : r.devices
        model.set(key, { ...r, devices: [...list, d] })
        expect(table.addDevice(e, d)).toBe(false)
      }
    } else {
      const e = table.find(key)
      const r = model.get(key)
      expect(e >= 0).toBe(r !== undefined)
      if (r) expect(table.row(e)).toEqual(asRead(r))
    }
    expect(table.size).toBe(model.size)
    expect(table.size).toBeLessThanOrEqual(cap)
  }
  for (const [k, r] of model) expect(table.row(table.find(k))).toEqual(asRead(r))
  table.clear()
  expect(table.size).toBe(0)
  for (const k of model.keys()) expect(table.find(k)).toBe(-1)
})

test('keys that differ only past their first bytes are different keys', () => {
  const table = new KeyTable(10)
  const a = Buffer.alloc(32, 7)
  const b = Buffer.from(a)
  b[31] = 8
  table.set(a.toString('base64'), row({ productId: 'a' }), 0)
  expect(table.find(b.toString('base64'))).toBe(-1)
  table.set(b.toString('base64'), row({ productId: 'b' }), 0)
  expect(table.row(table.find(a.toString('base64'))).productId).toBe('a')
  expect(table.row(table.find(b.toString('base64'))).productId).toBe('b')
})

test('devices are compared exactly, as the strings they were', () => {
  const table = new KeyTable(10)
  const key = digest()
  const [a, b] = [fp(), fp()]
  const e = table.set(key, row({ devices: [a] }), 0)
  expect(table.addDevice(e, a)).toBe(false)
  expect(table.addDevice(e, a.toUpperCase())).toBe(true) // not the same string: another device, as before packing
  expect(table.addDevice(e, b)).toBe(true)
  expect(table.row(e).devices).toEqual([a, a.toUpperCase(), b])
  const f = table.set(digest(), row({ devices: [a, b] }), 0)
  expect(table.addDevice(f, b)).toBe(false)
  expect(table.row(f).devices).toEqual([a, b])
})

test('keys with many devices: chunks grow, move and are reused without mixing keys up', () => {
  const table = new KeyTable(100)
  const lists = new Map<string, string[]>()
  for (let round = 0; round < 20; round++) {
    for (let k = 0; k < 50; k++) {
      const key = `key-${k}`
      let e = table.find(key)
      if (e < 0 || Math.random() < 0.2) {
        const list = Array.from({ length: 1 + Math.floor(Math.random() * 5) }, fp)
        e = table.set(key, row({ devices: list }), 0)
        lists.set(key, list)
      }
      const more = Math.floor(Math.random() * 4)
      for (let i = 0; i < more; i++) {
        const d = fp()
        expect(table.addDevice(e, d)).toBe(true)
        lists.get(key)!.push(d)
      }
      if (Math.random() < 0.1) {
        table.delete(key)
        lists.delete(key)
      }
    }
    for (const [key, list] of lists) {
      const devices = table.row(table.find(key)).devices
      expect(list.length === 1 ? [devices] : devices).toEqual(list)
    }
  }
})

import { expect, test } from 'bun:test'
import { isId, newId, ulid } from '../../src/infra/crypto'

test('ids made by one process sort in creation order, even within one millisecond', () => {
  const now = Date.now()
  const sameMs = Array.from({ length: 2000 }, () => ulid(now))
  expect(new Set(sameMs).size).toBe(sameMs.length)
  expect([...sameMs].sort()).toEqual(sameMs)
  const ids = Array.from({ length: 2000 }, () => newId('act'))
  expect([...ids].sort()).toEqual(ids)
  expect(ids.every((id) => isId('act', id))).toBe(true)
})

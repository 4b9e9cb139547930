// A released seat stays taken until its release is in force on every node: the release's transaction
// holds it (seat_held_until), the one after-commit path frees it once the invalidation returned, and
// the hold runs out on its own should the releasing node die in between.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { takeSeat, lockKeyForSeat, freeSeat } from '../../src/modules/activations/repo'
import { afterRelease } from '../../src/modules/activations/service'
import { DEVICE } from '../../src/modules/events/outbox'
import { fingerprint, useHarness } from '../support/harness'
import { setup } from '../validation/support'

setDefaultTimeout(60_000)
const h = useHarness({ socket: false })

test('a held seat is refused to a new device, free once afterRelease ran, and free on its own past the hold', async () => {
  const { accountId, key } = await setup(h, { activation_limit: 1 })
  const sql = h.node.deps.sql
  const claim = (device: string) =>
    sql.begin(async (tx) => {
      const locked = (await lockKeyForSeat(tx, accountId, { id: key.id }))!
      return (await takeSeat(tx, locked, { fingerprint: device, appVersion: null, country: null }, DEVICE)).kind
    })
  const release = (device: string, holdMs: number) =>
    sql.begin(async (tx) => {
      const locked = (await lockKeyForSeat(tx, accountId, { id: key.id }))!
      return (await freeSeat(tx, locked, { fingerprint: device }, 'admin', DEVICE, holdMs))!
    })
  const [a, b, c] = [fingerprint(), fingerprint(), fingerprint()]
  expect(await claim(a)).toBe('created')

  // released, not yet in force everywhere: the seat is still taken, also for the released device
  const released = await release(a, 60_000)
  expect(await claim(b)).toBe('limit')
  expect(await claim(a)).toBe('limit')
  const [{ key_hash }] = await sql<{ key_hash: string }[]>`select key_hash from license_keys where id = ${key.id}`
  await afterRelease(h.node.deps, { activationIds: [released.id], keyHashes: [key_hash!], accountId })
  expect(await claim(b)).toBe('created')

  // a releasing node that never frees the seat: the hold runs out on its own
  await release(b, 300)
  expect(await claim(c)).toBe('limit')
  await Bun.sleep(400)
  expect(await claim(c)).toBe('created')
})

// Relay seats (docs/api.md, "Relays"): a relay's seats count as activations of its key. They are taken
// and given back here, in the seats room, under the key's row lock (`lockKeyForSeat`), the lock every
// device's seat decision holds too: so a key's active devices plus its live relays' seats never exceed
// its activation_limit, whatever the number of nodes and callers. After the commit the key is dropped
// from every node's hot state (the hot state counts relay seats: validation/repo.ts loadKeyState), and
// the call returns once that is in force, as after any seat change.
import type { Deps } from '../../deps'
import type { Tx } from '../../infra/db'
import { relaySeatsOf } from './relay-count'
import { lockForClaim, lockKeyForSeat, type KeyRefusedClaim, type SeatKey } from './repo'

type SeatDeps = Pick<Deps, 'sql' | 'bus'>

/** The seats of the locked key that no device and no other relay holds (held releases count as taken). */
async function freeSeats(tx: Tx, key: SeatKey, exceptRelayId: string | null): Promise<number> {
  const [{ active, held }] = await tx<{ active: number; held: number }[]>`select
      count(*) filter (where status = 'active')::int as active,
      count(*) filter (where seat_held_until is not null and seat_held_until > now())::int as held
    from activations where key_id = ${key.id}`
  return key.activation_limit - active - held - (await relaySeatsOf(tx, key.id, exceptRelayId))
}

export type RelayClaim<T> =
  | KeyRefusedClaim
  /** `free`: the seats the relay could have (its own current seats included) */
  | { kind: 'limit'; key: SeatKey; free: number }
  | { kind: 'taken'; key: SeatKey; extra: T }

/**
 * A relay takes `seats` of the key (or keeps them: `existing` finds the live relay a repeated request
 * names, in the transaction, and its seats are counted as free for it). `write` stores the relay and its
 * event in the same transaction once the seats are there. The key is dropped from every node's memory
 * before this returns.
 */
export async function claimRelaySeats<T>(
  deps: SeatDeps,
  accountId: string,
  keyId: string,
  seats: number,
  existing: (tx: Tx, key: SeatKey) => Promise<string | null>,
  write: (tx: Tx, key: SeatKey, relayId: string | null) => Promise<T>,
): Promise<RelayClaim<T>> {
  const result = await deps.sql.begin(async (tx): Promise<RelayClaim<T>> => {
    const key = await lockForClaim(tx, accountId, { id: keyId })
    if ('kind' in key) return key
    const relayId = await existing(tx, key)
    const free = await freeSeats(tx, key, relayId)
    if (seats > free) return { kind: 'limit', key, free: Math.max(0, free) }
    return { kind: 'taken', key, extra: await write(tx, key, relayId) }
  })
  if (result.kind === 'taken') await deps.bus.publish({ kind: 'key', accountId, keyHash: result.key.key_hash })
  return result
}

/**
 * A relay gives its seats back: `remove` marks it deleted (with its event) under the key's row lock;
 * null when there is nothing to remove. The key is dropped from every node's memory before this returns.
 */
export async function releaseRelaySeats<T>(
  deps: SeatDeps,
  accountId: string,
  keyId: string,
  remove: (tx: Tx, key: SeatKey) => Promise<T | null>,
): Promise<T | null> {
  const result = await deps.sql.begin(async (tx) => {
    const key = await lockKeyForSeat(tx, accountId, { id: keyId })
    if (!key) return null
    const removed = await remove(tx, key)
    return removed === null ? null : { removed, keyHash: key.key_hash }
  })
  if (result === null) return null
  await deps.bus.publish({ kind: 'key', accountId, keyHash: result.keyHash })
  return result.removed
}

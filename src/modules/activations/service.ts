// Seat changes, in one place: a device claims a seat (validate's new device, an offline license), its
// holder releases one (POST /v1/deactivate), the admin releases one (DELETE /v1/keys/:id/activations/:id),
// the inactivity job releases idle ones (inactivity-release.ts). Validation decides answers and calls
// these; offline calls them. Each change and its event commit in one transaction (the outbox); what
// follows a commit is written once here:
// - a claim announces the new device to every node (`device`: it only saves them a read; a failed
//   broadcast is logged, the activation is committed either way);
// - every release goes through `afterRelease`: the key is invalidated on every node and the bus waits
//   until that is in force (each member's ack, its seen row, or its trust window: the fault rule every
//   write follows), and only then is the seat freed. Until then the released activation holds its seat
//   (`seat_held_until`, bounded by `seatHoldMs` should this node die first), so no other device can
//   take it while some node may still answer valid for the released one; an inactivity release during
//   a NATS outage once let a 2-seat key have 3 valid devices for a few hundred milliseconds.
import { AppError, notFound } from '../../core/errors'
import type { Principal } from '../../core/principal'
import type { Deps } from '../../deps'
import { KEYS_PER_MESSAGE } from '../../infra/bus'
import { isId } from '../../infra/crypto'
import type { Tx } from '../../infra/db'
import { byApiKey, DEVICE, type Actor } from '../events/outbox'
import type { Activation } from './model'
import { relaySeatsOf } from './relay-count'
import {
  takeSeat,
  countActive,
  countUserRelease,
  findActivation,
  freeSeats,
  isActiveDevice,
  lockForClaim,
  lockKeyForSeat,
  mayReleaseAsUser,
  freeSeat,
  type SeatDevice,
  type KeyRefusedClaim,
  type SeatKey,
  type SlotResult,
} from './repo'
import { identityStep, releaseRebindHold, type IdentityStep } from './identity'

export type SeatDeps = Pick<Deps, 'sql' | 'bus' | 'log' | 'config'>

type KeyRefused = 'not_found' | 'revoked' | 'suspended' | 'expired'
const KEY_REFUSALS: Record<Exclude<KeyRefused, 'not_found'>, string> = { revoked: 'is revoked', suspended: 'is suspended', expired: 'has expired' }

/** Whether a claim was refused by the key itself (not there, revoked, suspended, expired), not by its seats. */
export const isKeyRefused = <C extends { kind: string }>(claim: C): claim is Extract<C, { kind: KeyRefused }> =>
  claim.kind === 'not_found' || Object.hasOwn(KEY_REFUSALS, claim.kind)

/**
 * Such a refusal as an admin route answers it (offline licenses, relays): 404 for a key that is not
 * there, 409 `key_revoked` / `key_suspended` / `key_expired`.
 */
export function keyRefusal(keyId: string, kind: KeyRefused): AppError {
  return kind === 'not_found' ? notFound('key', keyId) : new AppError(`key_${kind}`, `Key ${keyId} ${KEY_REFUSALS[kind]}`)
}

/**
 * The most a released seat stays held: longer than any invalidation wait (numbering the change, up to
 * 2 s, then the members' trust window, DEGRADED_TTL_MS, and a margin). Normally the releasing node
 * frees it as soon as its wait returns; this bound only matters when that node dies in between.
 */
export const seatHoldMs = (config: SeatDeps['config']) => config.degradedTtlMs + 5_000

/** What a committed release changed: the activations whose seats are held, and their keys. */
export interface Released {
  activationIds: string[]
  keyHashes: string[]
  /** the account, when every key is one account's (a single release) */
  accountId?: string
}

/**
 * After a committed release, the one path every release takes: drop the keys from every node's memory
 * and wait until that is in force, then free the held seats. A failed free is logged: the hold runs
 * out on its own (`seatHoldMs`).
 */
export async function afterRelease(deps: SeatDeps, released: Released): Promise<void> {
  const { keyHashes, accountId } = released
  if (keyHashes.length === 1 && accountId !== undefined) await deps.bus.publish({ kind: 'key', accountId, keyHash: keyHashes[0]! })
  else {
    for (let i = 0; i < keyHashes.length; i += KEYS_PER_MESSAGE) {
      await deps.bus.publish({ kind: 'keys', keyHashes: keyHashes.slice(i, i + KEYS_PER_MESSAGE) })
    }
  }
  await freeSeats(deps.sql, released.activationIds).catch((err) =>
    deps.log.warn({ err: String(err) }, 'freeing released seats failed; their hold runs out on its own'),
  )
}

/** A seat held: the device's own, a new one, or (machine identity) one taken over by a rebind. */
export type HeldSeat = Exclude<SlotResult, { kind: 'limit' | 'device_used' }> | Extract<IdentityStep, { kind: 'rebound' }>

export type ClaimResult<T> =
  | KeyRefusedClaim
  | { kind: 'limit'; key: SeatKey; activeCount: number }
  | { kind: 'device_used'; key: SeatKey }
  /** machine identity refused the device (docs/integrating.md, "Identifying machines") */
  | { kind: 'mismatch'; key: SeatKey }
  | (HeldSeat & { key: SeatKey; extra: T })

/** What a claim does with its seat in the same transaction (offline: store and sign the license). */
export type InClaim<T> = (tx: Tx, key: SeatKey, seat: HeldSeat) => Promise<T>

/** A seat taken (or refused by the seats), with what the claim did in its transaction. */
async function seated<T>(tx: Tx, key: SeatKey, seat: SlotResult | Extract<IdentityStep, { kind: 'rebound' }>, inClaim: InClaim<T> | undefined): Promise<ClaimResult<T>> {
  if (seat.kind === 'limit' || seat.kind === 'device_used') return { ...seat, key }
  return { ...seat, key, extra: (inClaim ? await inClaim(tx, key, seat) : undefined) as T }
}

/**
 * A device claims a seat of the key (`where`: by hash for validate, by id for offline), under the key
 * row lock: its existing activation, a new one, or a refusal. `inClaim` runs in the transaction once a
 * seat is held. A new device is announced to every node after the commit.
 */
export async function claimSeat<T = undefined>(
  deps: SeatDeps,
  accountId: string,
  where: { id: string } | { keyHash: string },
  device: SeatDevice,
  actor: Actor,
  inClaim?: InClaim<T>,
  /** validate: the key's active fingerprints its memory decided from (identity.ts `identityStep`) */
  seen: readonly string[] | null = null,
): Promise<ClaimResult<T>> {
  const result = await deps.sql.begin(async (tx): Promise<ClaimResult<T>> => {
    const key = await lockForClaim(tx, accountId, where)
    if ('kind' in key) return key
    const identity = key.component_match === 'off' ? null : await identityStep(tx, key, device, actor, seen, seatHoldMs(deps.config))
    if (identity?.kind === 'mismatch') return { kind: 'mismatch', key }
    return seated(tx, key, identity ?? (await takeSeat(tx, key, device, actor)), inClaim)
  })
  await announceClaim(deps, accountId, result, device.fingerprint)
  return result
}

/**
 * After a committed claim: a new device is announced to every node (or its key dropped everywhere
 * when the claim started its term). A rebind is a seat change: the old fingerprint is refused on every
 * node before the answer returns (the bus waits until the drop is in force, as for a release), then
 * its hold is released (activations/identity.ts). With machine identity on, a new device's components
 * must reach every node's memory too, so the key is read again everywhere.
 */
async function announceClaim<T>(deps: SeatDeps, accountId: string, result: ClaimResult<T>, fingerprint: string): Promise<void> {
  if (result.kind === 'rebound' || (result.kind === 'created' && result.key.component_match !== 'off')) {
    await deps.bus.publish({ kind: 'key', accountId, keyHash: result.key.key_hash })
    if (result.kind === 'rebound') {
      await releaseRebindHold(deps.sql, result.activation.id).catch((err) =>
        deps.log.warn({ err: String(err) }, 'releasing a rebind hold failed; it runs out on its own'),
      )
    }
  } else if (result.kind === 'created' && result.expirySet) {
    // The first activation started the key's term (expiry_basis first_activation): every node reads
    // the key again, with its expiry, before the answer. The activation is committed either way, so a
    // failed broadcast is logged (nodes that missed it stop trusting their memory).
    await deps.bus
      .publish({ kind: 'key', accountId, keyHash: result.key.key_hash })
      .catch((err) => deps.log.warn({ err: String(err) }, 'expiry broadcast failed'))
  } else if (result.kind === 'created') {
    await deps.bus
      .publish({ kind: 'device', accountId, keyHash: result.key.key_hash, fingerprint, activationId: result.activation.id })
      .catch((err) => deps.log.warn({ err: String(err) }, 'device broadcast failed'))
  }
}

/**
 * The air-gapped claim (modules/air-gapped/service.ts): claimSeat's, except that under the key row
 * lock, once the key's own refusals are passed, `before` may answer instead of a seat (the same
 * request code again, a component refusal). The announcement after the commit is claimSeat's.
 */
export async function claimSeatUnless<T, A>(
  deps: SeatDeps,
  accountId: string,
  where: { id: string } | { keyHash: string },
  device: SeatDevice,
  actor: Actor,
  before: (tx: Tx, key: SeatKey) => Promise<A | null>,
  inClaim: InClaim<T>,
): Promise<ClaimResult<T> | { kind: 'answered'; key: SeatKey; answer: A }> {
  const result = await deps.sql.begin(async (tx): Promise<ClaimResult<T> | { kind: 'answered'; key: SeatKey; answer: A }> => {
    const key = await lockForClaim(tx, accountId, where)
    if ('kind' in key) return key
    const answer = await before(tx, key)
    if (answer !== null) return { kind: 'answered', key, answer }
    return seated(tx, key, await takeSeat(tx, key, device, actor), inClaim)
  })
  if (result.kind !== 'answered') await announceClaim(deps, accountId, result, device.fingerprint)
  return result
}

/**
 * A holder release of one activation by id (the air-gapped deactivation, modules/air-gapped/service.ts),
 * counted toward `deactivations_allowed` exactly as releaseByHolder's, under the key row lock (past the
 * cap: 409 `deactivation_limit`, nothing changes). `before` runs under the lock first and may answer
 * instead (the same code again); `inRelease` records the release in its transaction. After the commit,
 * afterRelease (the key dropped on every node before the seat is free). `inactive`: the activation was
 * not active; null: the account has no such key.
 */
export async function releaseActivationByHolder<A, R>(
  deps: SeatDeps,
  accountId: string,
  keyId: string,
  activationId: string,
  actor: Actor,
  before: (tx: Tx) => Promise<A | null>,
  inRelease: (tx: Tx, released: Activation) => Promise<R>,
): Promise<{ kind: 'answered'; answer: A } | { kind: 'released'; value: R } | { kind: 'inactive' } | null> {
  const result = await deps.sql.begin(async (tx) => {
    const key = await lockKeyForSeat(tx, accountId, { id: keyId })
    if (!key) return null
    const answer = await before(tx)
    if (answer !== null) return { kind: 'answered' as const, answer }
    const [active] = await tx`select 1 from activations where id = ${activationId} and key_id = ${keyId} and status = 'active'`
    if (!active) return { kind: 'inactive' as const }
    if (!mayReleaseAsUser(key)) {
      throw new AppError('deactivation_limit', `This key allows its holder ${key.deactivations_allowed} deactivations, and all are used`)
    }
    const released = await freeSeat(tx, key, { activationId }, 'user', actor, seatHoldMs(deps.config))
    if (!released) return { kind: 'inactive' as const }
    await countUserRelease(tx, key.id)
    return { kind: 'released' as const, value: await inRelease(tx, released), keyHash: key.key_hash }
  })
  if (result?.kind === 'released') {
    await afterRelease(deps, { activationIds: [activationId], keyHashes: [result.keyHash], accountId })
    return { kind: 'released', value: result.value }
  }
  return result
}

/**
 * POST /v1/deactivate: the key's holder releases one of its devices (reason `user`), counted against
 * `deactivations_allowed` under the key row lock: past the cap a release that would happen is 409
 * `deactivation_limit` and nothing changes. null when the account has no key with this hash.
 */
export async function releaseByHolder(
  deps: SeatDeps,
  accountId: string,
  keyHash: string,
  fingerprint: string,
): Promise<{ deactivated: boolean; used: number; limit: number } | null> {
  const result = await deps.sql.begin(async (tx) => {
    const key = await lockKeyForSeat(tx, accountId, { keyHash })
    if (!key) return null
    if (!mayReleaseAsUser(key) && (await isActiveDevice(tx, key.id, fingerprint))) {
      throw new AppError('deactivation_limit', `This key allows its holder ${key.deactivations_allowed} deactivations, and all are used`)
    }
    const released = await freeSeat(tx, key, { fingerprint }, 'user', DEVICE, seatHoldMs(deps.config))
    if (released) await countUserRelease(tx, key.id)
    return { released, used: (await countActive(tx, key.id)) + (await relaySeatsOf(tx, key.id)), limit: key.activation_limit }
  })
  if (!result) return null
  if (result.released) await afterRelease(deps, { activationIds: [result.released.id], keyHashes: [keyHash], accountId })
  return { deactivated: result.released !== null, used: result.used, limit: result.limit }
}

/** DELETE /v1/keys/:id/activations/:activation_id (reason `admin`); already deactivated → 200 as is. */
export async function releaseByAdmin(deps: SeatDeps, who: Principal, keyId: string, activationId: string): Promise<Activation> {
  if (!isId('key', keyId)) throw notFound('key', keyId)
  if (!isId('act', activationId)) throw notFound('activation', activationId)
  const result = await deps.sql.begin(async (tx) => {
    const key = await lockKeyForSeat(tx, who.accountId, { id: keyId })
    if (!key) throw notFound('key', keyId)
    const released = await freeSeat(tx, key, { activationId }, 'admin', byApiKey(who), seatHoldMs(deps.config))
    if (released) return { activation: released, keyHash: key.key_hash }
    const activation = await findActivation(tx, keyId, activationId)
    if (!activation) throw notFound('activation', activationId)
    return { activation, keyHash: null }
  })
  if (result.keyHash) await afterRelease(deps, { activationIds: [result.activation.id], keyHashes: [result.keyHash], accountId: who.accountId })
  return result.activation
}

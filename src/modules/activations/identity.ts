// Machine identity in the seats room: the component step of a seat decision when the key's
// component_match rule is on (docs/integrating.md, "Identifying machines"; the rule itself is
// core/component-match.ts). It runs under the key row lock (`lockKeyForSeat`), before the usual seat
// steps, and is the one implementation of the decision in Postgres: validate's new or unknown devices
// (service.ts claimSeat) and anything else that activates "exactly as validate does" call it.
//
// 6a: the fingerprint holds an active activation: the components sent match its stored ones → the seat
//     is its (the stored set follows them when they differ); a mismatch, or none sent → device_mismatch.
// 6b: the fingerprint is one an active activation replaced → device_mismatch.
// 6c: the components match an active activation's → rebind: that activation takes the new fingerprint
//     (same id, seat, activated_at and name), remembers the old one, and `activation.rebound` is emitted
//     in the same transaction. The caller makes it in force on every node before answering.
// otherwise: null, and the seat steps go on as before (a new activation stores the components).
import { componentsMatch, pickRebind, sameComponents, withReplaced, type Components } from '../../core/component-match'
import type { Sql, Tx } from '../../infra/db'
import { emit, type Actor } from '../events/outbox'
import type { Activation } from './model'
import { activationColumns, toActivation, type ActivationRow, type SeatDevice, type SeatKey } from './repo'

export type IdentityStep =
  /** 6a: the device's own activation (its stored components now the ones sent) */
  | { kind: 'existing'; activation: Activation; activeCount: number }
  /** 6c: an activation taken over by this fingerprint */
  | { kind: 'rebound'; activation: Activation; activeCount: number; previousFingerprint: string }
  /** 6a mismatch, no components, 6b, or a rebind lost to another one (see `contested`) */
  | { kind: 'mismatch' }

type Candidate = {
  id: string
  device_fingerprint: string
  components: Components | null
  replaced_fingerprints: string[]
  last_validated_at: Date | null
  /** a rebind of it is not yet in force on every node */
  rebind_held: boolean
}

/**
 * The component step for a locked key whose rule is on. `seen`: the key's active fingerprints as the
 * caller decided from (validate's hot state; null when it had none). A rebind whose target is not
 * among them took a seat that changed since the caller looked: another device won that race (a clone
 * rebinding first, or activating first), and this one is refused rather than taking the seat over in
 * turn, so two devices racing never both end up valid on one seat (one wins, the other is refused).
 * Returns null when the seat steps decide (a new device matching nothing).
 */
export async function identityStep(
  tx: Tx,
  key: SeatKey,
  device: SeatDevice,
  actor: Actor,
  seen: readonly string[] | null = null,
  /** how long a rebind holds the activation at most (released by `releaseRebindHold` once in force) */
  holdMs = 30_000,
): Promise<IdentityStep | null> {
  const rule = key.component_match
  const sent = device.components ?? null
  // With the rule on, a device that sends no components is refused before any seat is taken.
  if (sent === null) return { kind: 'mismatch' }
  const active = await tx<Candidate[]>`select id, device_fingerprint, components, replaced_fingerprints, last_validated_at,
      coalesce(rebind_held_until > now(), false) as rebind_held
    from activations where key_id = ${key.id} and status = 'active'`
  const fingerprint = device.fingerprint
  const mine = active.find((a) => a.device_fingerprint === fingerprint)
  if (mine) {
    // 6a; an activation that never had components adopts the first ones sent for its fingerprint
    if (mine.components !== null && !componentsMatch(rule, mine.components, sent)) return { kind: 'mismatch' }
    const activation = await storeComponents(tx, mine, sent)
    return { kind: 'existing', activation, activeCount: active.length }
  }
  // 6b
  if (active.some((a) => a.replaced_fingerprints.includes(fingerprint))) return { kind: 'mismatch' }
  // 6c
  const target = pickRebind(
    rule,
    sent,
    active.map((a) => ({ item: a, components: a.components, lastValidatedAt: a.last_validated_at?.getTime() ?? null })),
  )
  if (target === null) return null
  // the seat changed hands since the caller looked, or its last rebind is not yet in force on every
  // node: this device lost the race for it
  if (target.rebind_held || (seen !== null && !seen.includes(target.device_fingerprint))) return { kind: 'mismatch' }
  const activation = await rebind(tx, target, device, sent, holdMs)
  await emit(
    tx,
    key.account_id,
    'activation.rebound',
    { activation, key_id: key.id, product_id: key.product_id, previous_fingerprint: target.device_fingerprint },
    actor,
  )
  return { kind: 'rebound', activation, activeCount: active.length, previousFingerprint: target.device_fingerprint }
}

/** 6a: the stored set follows the components sent (written only when they differ). */
async function storeComponents(tx: Tx, a: Candidate, sent: Components): Promise<Activation> {
  if (a.components !== null && sameComponents(a.components, sent)) {
    const [row] = await tx<ActivationRow[]>`select ${activationColumns(tx)} from activations where id = ${a.id}`
    return toActivation(row!)
  }
  const [row] = await tx<ActivationRow[]>`update activations set components = ${tx.json(sent)}, components_changed_at = now()
    where id = ${a.id} returning ${activationColumns(tx)}`
  return toActivation(row!)
}

/**
 * 6c: the activation takes the new fingerprint and components; its id, seat, activated_at and name stay,
 * and the old fingerprint leads its replaced list (newest first, at most 8: core/component-match.ts).
 */
async function rebind(tx: Tx, target: Candidate, device: SeatDevice, sent: Components, holdMs: number): Promise<Activation> {
  const replaced = withReplaced(target.replaced_fingerprints, target.device_fingerprint)
  const changed = target.components === null || !sameComponents(target.components, sent)
  const [row] = await tx<ActivationRow[]>`update activations set device_fingerprint = ${device.fingerprint},
      components = ${tx.json(sent)}, components_changed_at = ${changed ? tx`now()` : tx`components_changed_at`},
      replaced_fingerprints = ${replaced}::text[], last_validated_at = now(), app_version = coalesce(${device.appVersion}, app_version),
      rebind_held_until = now() + make_interval(secs => ${holdMs / 1000})
    where id = ${target.id} returning ${activationColumns(tx)}`
  return toActivation(row!)
}

/** A rebind is in force on every node: the activation may be taken over again (a failed write: the hold runs out). */
export async function releaseRebindHold(sql: Sql, activationId: string): Promise<void> {
  await sql`update activations set rebind_held_until = null where id = ${activationId} and rebind_held_until is not null`
}

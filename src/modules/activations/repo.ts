// Seats. The one place that decides whether a device may take a seat of a key: used by
// validation (new device) and by offline licenses. Callers hold the key row lock (`lockKeyForSeat`)
// in the same transaction, so N devices racing for the last seat produce exactly one activation.
import type { SettingValues } from '../../core/key-settings'
import type { Sql, Tx } from '../../infra/db'
import { newId } from '../../infra/crypto'
import { iso } from '../../core/values'
import { emit, emitMany, SYSTEM, type Actor } from '../events/outbox'
import type { Activation } from './model'
import type { Components } from '../../core/component-match'
import { effectiveSettings, expiryRefused, joinPolicy } from '../policies/repo'
import { addPeriod, parsePeriod } from '../../core/durations'
import { relaySeatsOf } from './relay-count'

/** The key of the policy that `fingerprint` first activated, or null (one_key_per_device). */
async function holderOf(tx: Tx, policyId: string, fingerprint: string): Promise<string | null> {
  const [row] = await tx<{ key_id: string }[]>`select key_id from policy_devices where policy_id = ${policyId} and device_fingerprint = ${fingerprint}`
  return row?.key_id ?? null
}

export type ActivationRow = {
  id: string
  device_fingerprint: string
  device_name: string | null
  app_version: string | null
  country: string | null
  status: 'active' | 'deactivated'
  activated_at: Date
  last_validated_at: Date | null
  deactivated_at: Date | null
  deactivation_reason: string | null
  components: Record<string, string> | null
  components_changed_at: Date | null
  replaced_fingerprints: string[]
  device_public_key: string | null
}

// Every read of an activation (select, insert and update ... returning) names these columns through
// `activationColumns`: a column added to the model is added here once, and the check below fails the
// typecheck until it is (the inactivity release once hand-copied its list and lost device_name).
const COLUMNS = [
  'id',
  'device_fingerprint',
  'device_name',
  'app_version',
  'country',
  'status',
  'activated_at',
  'last_validated_at',
  'deactivated_at',
  'deactivation_reason',
  'components',
  'components_changed_at',
  'replaced_fingerprints',
  'device_public_key',
] as const satisfies readonly (keyof ActivationRow)[]
const complete: Exclude<keyof ActivationRow, (typeof COLUMNS)[number]> extends never ? true : never = true
void complete

/** The activation columns, optionally qualified by a table alias (`a.id, a.device_fingerprint, …`). */
export const activationColumns = (sql: Sql | Tx, alias?: string) => sql.unsafe(COLUMNS.map((c) => (alias ? `${alias}.${c}` : c)).join(', '))

export const toActivation = (r: ActivationRow): Activation => ({
  id: r.id,
  device_fingerprint: r.device_fingerprint,
  device_name: r.device_name,
  app_version: r.app_version,
  country: r.country,
  status: r.status,
  activated_at: iso(r.activated_at)!,
  last_validated_at: iso(r.last_validated_at),
  deactivated_at: iso(r.deactivated_at),
  deactivation_reason: r.deactivation_reason,
  components: r.components,
  components_changed_at: iso(r.components_changed_at),
  replaced_fingerprints: r.replaced_fingerprints,
  offline: r.device_public_key !== null,
})

/** A key's activations, oldest first (every status). */
export async function listActivations(sql: Sql, keyId: string): Promise<Activation[]> {
  const rows = await sql<ActivationRow[]>`select ${activationColumns(sql)} from activations
    where key_id = ${keyId} order by activated_at, id`
  return rows.map(toActivation)
}

/** One activation of a key (any status); null when the key has none with this id. */
export async function findActivation(sql: Sql | Tx, keyId: string, activationId: string): Promise<Activation | null> {
  const [row] = await sql<ActivationRow[]>`select ${activationColumns(sql)} from activations
    where id = ${activationId} and key_id = ${keyId}`
  return row ? toActivation(row) : null
}

/** The key row a seat decision locks: its state and its effective settings (core/key-settings.ts). */
export interface SeatKey extends SettingValues {
  id: string
  account_id: string
  product_id: string
  status: 'active' | 'revoked' | 'expired'
  /** validate refuses it for its expiry: past expires_at + grace_seconds, and not kept (after_expiry keep) */
  expired: boolean
  /** suspended (and not revoked): refused before expiry is looked at */
  suspended: boolean
  expires_at: Date | null
  key_hash: string
  /** holder releases made so far (of deactivations_allowed) */
  deactivations_used: number
  policy_id: string | null
  /** expiry_basis first_activation, before the first activation: the duration it adds */
  pending_duration: string | null
}

/** Locks the key row for a seat decision. null when the key is not in this account. */
export async function lockKeyForSeat(tx: Tx, accountId: string, where: { id: string } | { keyHash: string }) {
  const cond = 'id' in where ? tx`k.id = ${where.id}` : tx`k.key_hash = ${where.keyHash}`
  // The key row only is locked (`of k`): keys of one policy never wait on each other.
  const [row] = await tx<SeatKey[]>`select k.id, k.account_id, k.product_id, k.status, k.expires_at, k.key_hash, k.policy_id, k.pending_duration,
      k.deactivations_used, ${expiryRefused(tx)} as expired, k.suspended_at is not null as suspended, ${effectiveSettings(tx)}
    from license_keys k ${joinPolicy(tx)} where ${cond} and k.account_id = ${accountId} for update of k`
  return row ?? null
}

/** What a seat claim answers when the key itself refuses it (not there, revoked, suspended, expired). */
export type KeyRefusedClaim = { kind: 'not_found' } | { kind: 'revoked' | 'suspended' | 'expired'; key: SeatKey }

/** The key locked for a seat change (`lockKeyForSeat`), or the key's own refusal of a claim. */
export async function lockForClaim(tx: Tx, accountId: string, where: { id: string } | { keyHash: string }): Promise<SeatKey | KeyRefusedClaim> {
  const key = await lockKeyForSeat(tx, accountId, where)
  if (!key) return { kind: 'not_found' }
  if (key.status === 'revoked') return { kind: 'revoked', key }
  if (key.suspended) return { kind: 'suspended', key }
  if (key.expired) return { kind: 'expired', key }
  return key
}

/** The device asking for a seat: its fingerprint, what it reports, and its components (null: none sent). */
export interface SeatDevice {
  fingerprint: string
  appVersion: string | null
  country: string | null
  name?: string | null
  components?: Components | null
  /** an air-gapped activation's id, chosen before the claim, and its device key */
  activationId?: string
  publicKey?: string
}

export type SlotResult =
  | { kind: 'existing'; activation: Activation; activeCount: number }
  /** `expirySet`: this was the key's first activation and it started the key's expiry (key.expires_at is updated) */
  | { kind: 'created'; activation: Activation; activeCount: number; expirySet: boolean }
  | { kind: 'limit'; activeCount: number }
  /** one_key_per_device: the device already holds (or held) another key of the policy */
  | { kind: 'device_used' }

/**
 * Gives `fingerprint` a seat of the locked `key`: its existing active activation, a new one (with the
 * activation.created event in the same transaction), or `limit` when every seat is taken. A seat whose
 * release is not yet in force on every node (`seat_held_until`, see freeSeat) is still taken.
 */
export async function takeSeat(
  tx: Tx,
  key: SeatKey,
  device: SeatDevice,
  actor: Actor,
): Promise<SlotResult> {
  const active = await tx<{ id: string; device_fingerprint: string }[]>`select id, device_fingerprint from activations
    where key_id = ${key.id} and status = 'active'`
  // A relay's seats are the key's too (relay-seats.ts): counted as taken, and in activeCount. Read by
  // its own statement after the lock, never with it: a statement that waited for the lock reads the
  // other tables as of its start, and would miss the seats the lock's previous holder took.
  const relays = await relaySeatsOf(tx, key.id)
  const mine = active.find((a) => a.device_fingerprint === device.fingerprint)
  if (mine) {
    const [row] = await tx<ActivationRow[]>`select ${activationColumns(tx)} from activations where id = ${mine.id}`
    return { kind: 'existing', activation: toActivation(row), activeCount: active.length + relays }
  }
  // one_key_per_device: refused before the limit (the contract's order); recorded only with a seat
  const holder = key.one_key_per_device ? await holderOf(tx, key.policy_id!, device.fingerprint) : key.id
  if (holder !== null && holder !== key.id) return { kind: 'device_used' }
  if (holder === null) {
    if (active.length + relays >= key.activation_limit) return { kind: 'limit', activeCount: active.length + relays }
    // Two keys racing for one device: the primary key lets one insert win; the other sees its row.
    const [won] = await tx`insert into policy_devices (policy_id, device_fingerprint, key_id)
      values (${key.policy_id}, ${device.fingerprint}, ${key.id}) on conflict do nothing returning key_id`
    if (!won) return { kind: 'device_used' }
  }
  if (active.length + relays >= key.activation_limit) return { kind: 'limit', activeCount: active.length + relays }
  if (active.length + relays + (await heldSeats(tx, key.id)) >= key.activation_limit) return { kind: 'limit', activeCount: active.length + relays }
  // release_after_seconds: the key's setting, copied for the inactivity job's index (sql/018)
  // a new activation stores the components sent (docs/integrating.md, "Identifying machines")
  const components = device.components ?? null
  const [row] = await tx<ActivationRow[]>`insert into activations (id, account_id, key_id, product_id, device_fingerprint, device_name,
      app_version, country, last_validated_at, release_after_seconds, device_public_key, components, components_changed_at)
    values (${device.activationId ?? newId('act')}, ${key.account_id}, ${key.id}, ${key.product_id}, ${device.fingerprint}, ${device.name ?? null},
            ${device.appVersion}, ${device.country}, now(), ${key.release_after_seconds}, ${device.publicKey ?? null},
            ${components === null ? null : tx.json(components)}, ${components === null ? null : tx`now()`})
    returning ${activationColumns(tx)}`
  const activation = toActivation(row)
  await emit(tx, key.account_id, 'activation.created', { activation, key_id: key.id, product_id: key.product_id }, actor)
  // expiry_basis first_activation: the first device anywhere starts the term, exactly once (row lock held)
  let expirySet = false
  if (key.pending_duration !== null) {
    const period = parsePeriod(key.pending_duration)
    if (typeof period !== 'string') {
      key.expires_at = new Date(addPeriod(row.activated_at.getTime(), period))
      await tx`update license_keys set expires_at = ${key.expires_at}, pending_duration = null, updated_at = now() where id = ${key.id}`
      key.pending_duration = null
      expirySet = true
    }
  }
  return { kind: 'created', activation, activeCount: active.length + relays + 1, expirySet }
}

/** Seats of a key held by releases not yet in force everywhere (the partial index of sql/023). */
async function heldSeats(tx: Tx, keyId: string): Promise<number> {
  const [{ n }] = await tx<{ n: number }[]>`select count(*)::int as n from activations
    where key_id = ${keyId} and seat_held_until is not null and seat_held_until > now()`
  return n
}

/**
 * Deactivates one active activation (reason `user` or `admin`) with its event; null if none was active.
 * Its seat stays held for at most `holdMs`: the releasing node frees it once the release is in force on
 * every node (`freeSeats`), so no other device takes it while a node may still answer for the old one.
 */
export async function freeSeat(
  tx: Tx,
  key: { id: string; account_id: string; product_id: string },
  which: { activationId: string } | { fingerprint: string },
  reason: 'user' | 'admin',
  actor: Actor,
  holdMs: number,
): Promise<Activation | null> {
  const cond = 'activationId' in which ? tx`id = ${which.activationId}` : tx`device_fingerprint = ${which.fingerprint}`
  const [row] = await tx<ActivationRow[]>`update activations set status = 'deactivated', deactivated_at = now(), deactivation_reason = ${reason},
      seat_held_until = now() + make_interval(secs => ${holdMs / 1000})
    where key_id = ${key.id} and status = 'active' and ${cond} returning ${activationColumns(tx)}`
  if (!row) return null
  const activation = toActivation(row)
  await emit(tx, key.account_id, 'activation.deactivated', { activation, key_id: key.id, product_id: key.product_id }, actor)
  return activation
}

const dueCondition = (sql: Sql | Tx, graceMs: number) => sql`status = 'active' and release_after_seconds is not null
  and timezone('UTC', coalesce(last_validated_at, activated_at)) + make_interval(secs => release_after_seconds)
      <= timezone('UTC', now()) - make_interval(secs => ${graceMs / 1000})`

/** The release index's order (sql/018): with it, `limit n` reads the index instead of the table. */
const dueOrder = (sql: Sql | Tx) => sql`timezone('UTC', coalesce(last_validated_at, activated_at)) + make_interval(secs => release_after_seconds)`

/** Whether any active activation is idle past its key's release_after_seconds plus `graceMs` (one index probe). */
export async function anyInactive(sql: Sql | Tx, graceMs: number): Promise<boolean> {
  const rows = await sql`select 1 from activations where ${dueCondition(sql, graceMs)} order by ${dueOrder(sql)} limit 1`
  return rows.length > 0
}

/**
 * Inactivity release, one batch: deactivates (reason `inactive`) up to `batch` active activations that
 * have not validated for their key's release_after_seconds plus `graceMs`, with their events, in the
 * caller's transaction. Rows are claimed `for update skip locked` and the update re-checks
 * status = 'active', so concurrent sweeps never release (or announce) the same activation twice; a
 * row that a last-seen flush holds is skipped and re-read by the next sweep. No key row lock is taken
 * (and no lock is waited for), so a sweep cannot deadlock with seat decisions. Seats are held as in
 * freeSeat. Returns the activations released and the keys whose seats changed (their hashes), for
 * the invalidation.
 */
export async function releaseInactive(tx: Tx, graceMs: number, batch: number, holdMs: number) {
  const rows = await tx<(ActivationRow & { account_id: string; key_id: string; product_id: string; key_hash: string })[]>`
    with due as (
      select id from activations
      where ${dueCondition(tx, graceMs)}
      order by ${dueOrder(tx)}
      limit ${batch}
      for update skip locked
    ), released as (
      update activations a set status = 'deactivated', deactivated_at = now(), deactivation_reason = 'inactive',
        seat_held_until = now() + make_interval(secs => ${holdMs / 1000})
      from due
      where a.id = due.id and a.status = 'active'
      returning a.*)
    select ${activationColumns(tx, 'r')}, r.account_id, r.key_id, r.product_id, k.key_hash
    from released r join license_keys k on k.id = r.key_id`
  const keyHashes = new Set<string>()
  for (const r of rows) keyHashes.add(r.key_hash)
  // one event per release, all in one statement (one per row was most of a large sweep's time)
  await emitMany(
    tx,
    rows.map((r) => ({
      accountId: r.account_id,
      type: 'activation.deactivated',
      data: { activation: toActivation(r), key_id: r.key_id, product_id: r.product_id },
      actor: SYSTEM,
    })),
  )
  return { activationIds: rows.map((r) => r.id), keyHashes: [...keyHashes] }
}

/** Frees the seats of released activations once their release is in force on every node. */
export async function freeSeats(sql: Sql | Tx, activationIds: readonly string[]): Promise<void> {
  if (activationIds.length === 0) return
  await sql`update activations set seat_held_until = null where id = any(${activationIds as string[]}) and seat_held_until is not null`
}

/** A key's active activations, oldest first. */
export async function listActive(sql: Sql | Tx, keyId: string): Promise<Activation[]> {
  const rows = await sql<ActivationRow[]>`select ${activationColumns(sql)} from activations
    where key_id = ${keyId} and status = 'active' order by activated_at, id`
  return rows.map(toActivation)
}

/** Whether `fingerprint` holds an active activation of the key. */
export async function isActiveDevice(sql: Sql | Tx, keyId: string, fingerprint: string): Promise<boolean> {
  const rows = await sql`select 1 from activations where key_id = ${keyId} and device_fingerprint = ${fingerprint} and status = 'active'`
  return rows.length > 0
}

/** Whether the locked key's holder may release one more device (`deactivations_allowed`). */
export const mayReleaseAsUser = (key: SeatKey) => key.deactivations_allowed === null || key.deactivations_used < key.deactivations_allowed

/**
 * Counts one holder release against the locked key, in the release's transaction: with the row lock
 * held from the cap check to this write, N parallel releases at the cap release exactly the allowed number.
 */
export async function countUserRelease(tx: Tx, keyId: string): Promise<void> {
  await tx`update license_keys set deactivations_used = deactivations_used + 1 where id = ${keyId}`
}

export async function countActive(sql: Sql | Tx, keyId: string): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from activations where key_id = ${keyId} and status = 'active'`
  return n
}

// Activation slots. The one place that decides whether a device may take a slot of a key: used by
// validation (new device) and by offline licenses. Callers hold the key row lock (`lockKeyForSlot`)
// in the same transaction, so N devices racing for the last slot produce exactly one activation.
import type { Sql, Tx } from '../../infra/db'
import { newId } from '../../infra/crypto'
import { emit } from '../events/outbox'
import { activationColumns, toActivation } from '../keys/repo'
import type { Activation } from '../keys/model'

export interface SlotKey {
  id: string
  account_id: string
  product_id: string
  status: 'active' | 'revoked' | 'expired'
  /** true when the stored status is active but expires_at has passed */
  expired: boolean
  activation_limit: number
  expires_at: Date | null
  plan: string | null
  key_hash: string
}

/** Locks the key row for a slot decision. null when the key is not in this account. */
export async function lockKeyForSlot(tx: Tx, accountId: string, where: { id: string } | { keyHash: string }) {
  const cond = 'id' in where ? tx`id = ${where.id}` : tx`key_hash = ${where.keyHash}`
  const [row] = await tx<SlotKey[]>`select id, account_id, product_id, status, activation_limit, expires_at, plan, key_hash,
      (status = 'expired' or (status = 'active' and expires_at <= now())) as expired
    from license_keys where ${cond} and account_id = ${accountId} for update`
  return row ?? null
}

export type SlotResult =
  | { kind: 'existing'; activation: Activation; activeCount: number }
  | { kind: 'created'; activation: Activation; activeCount: number }
  | { kind: 'limit'; activeCount: number }

/**
 * Gives `fingerprint` a slot of the locked `key`: its existing active activation, a new one (with the
 * activation.created event in the same transaction), or `limit` when every slot is taken.
 */
export async function claimSlot(
  tx: Tx,
  key: SlotKey,
  device: { fingerprint: string; appVersion: string | null; country: string | null },
): Promise<SlotResult> {
  const active = await tx<{ id: string; device_fingerprint: string }[]>`select id, device_fingerprint from activations
    where key_id = ${key.id} and status = 'active'`
  const mine = active.find((a) => a.device_fingerprint === device.fingerprint)
  if (mine) {
    const [row] = await tx`select ${activationColumns(tx)} from activations where id = ${mine.id}`
    return { kind: 'existing', activation: toActivation(row as never), activeCount: active.length }
  }
  if (active.length >= key.activation_limit) return { kind: 'limit', activeCount: active.length }
  const [row] = await tx`insert into activations (id, account_id, key_id, product_id, device_fingerprint, app_version, country, last_validated_at)
    values (${newId('act')}, ${key.account_id}, ${key.id}, ${key.product_id}, ${device.fingerprint}, ${device.appVersion},
            ${device.country}, now())
    returning ${activationColumns(tx)}`
  const activation = toActivation(row as never)
  await emit(tx, key.account_id, 'activation.created', { activation, key_id: key.id, product_id: key.product_id })
  return { kind: 'created', activation, activeCount: active.length + 1 }
}

/** Deactivates one active activation (reason `user` or `admin`) with its event; null if none was active. */
export async function releaseSlot(
  tx: Tx,
  key: { id: string; account_id: string; product_id: string },
  which: { activationId: string } | { fingerprint: string },
  reason: 'user' | 'admin',
): Promise<Activation | null> {
  const cond = 'activationId' in which ? tx`id = ${which.activationId}` : tx`device_fingerprint = ${which.fingerprint}`
  const [row] = await tx`update activations set status = 'deactivated', deactivated_at = now(), deactivation_reason = ${reason}
    where key_id = ${key.id} and status = 'active' and ${cond} returning ${activationColumns(tx)}`
  if (!row) return null
  const activation = toActivation(row as never)
  await emit(tx, key.account_id, 'activation.deactivated', { activation, key_id: key.id, product_id: key.product_id })
  return activation
}

export async function countActive(sql: Sql | Tx, keyId: string): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from activations where key_id = ${keyId} and status = 'active'`
  return n
}

import type { JSONValue } from 'postgres'
import { iso } from '../../core/values'
import type { Sql, Tx } from '../../infra/db'
import { effectiveSettings, expiryRefused, joinPolicy } from '../policies/repo'
import type { Relay, RelaySummary } from './model'

type RelayRow = {
  id: string
  key_id: string
  product_id: string
  name: string
  seats: number
  lease_seconds: number
  ttl_seconds: number
  public_key: string
  device_fingerprint: string
  components: Record<string, string>
  license_id: string
  issued_at: Date
  expires_at: Date
  created_at: Date
  last_check_in_at: Date | null
  last_leases: number | null
  peak: number
}

/** The relay columns of `r` with its peak over the last 30 UTC days. */
const columns = (sql: Sql | Tx) => sql`r.id, r.key_id, r.product_id, r.name, r.seats, r.lease_seconds, r.ttl_seconds, r.public_key,
  r.device_fingerprint, r.components, r.license_id, r.issued_at, r.expires_at, r.created_at, r.last_check_in_at, r.last_leases,
  coalesce((select max(u.peak) from relay_usage u where u.relay_id = r.id and u.day > (now() at time zone 'UTC')::date - 30), 0)::int as peak`

const toRelay = (r: RelayRow): Relay => ({
  id: r.id,
  key_id: r.key_id,
  product_id: r.product_id,
  name: r.name,
  seats: r.seats,
  lease_seconds: r.lease_seconds,
  ttl_seconds: r.ttl_seconds,
  public_key: r.public_key,
  device_fingerprint: r.device_fingerprint,
  components: r.components,
  license_id: r.license_id,
  issued_at: iso(r.issued_at)!,
  expires_at: iso(r.expires_at)!,
  created_at: iso(r.created_at)!,
  last_check_in_at: iso(r.last_check_in_at),
  leases: r.last_leases,
  peak: r.peak,
})

/** A key's live relays, oldest first. */
export async function listRelays(sql: Sql | Tx, keyId: string): Promise<Relay[]> {
  const rows = await sql<RelayRow[]>`select ${columns(sql)} from relays r where r.key_id = ${keyId} and r.deleted_at is null
    order by r.created_at, r.id`
  return rows.map(toRelay)
}

/** The key detail's view of its live relays. */
export async function relaySummaries(sql: Sql | Tx, keyId: string): Promise<RelaySummary[]> {
  return (await listRelays(sql, keyId)).map((r) => ({
    id: r.id,
    name: r.name,
    seats: r.seats,
    expires_at: r.expires_at,
    last_check_in_at: r.last_check_in_at,
    peak: r.peak,
  }))
}

export async function findRelay(sql: Sql | Tx, id: string): Promise<Relay | null> {
  const [row] = await sql<RelayRow[]>`select ${columns(sql)} from relays r where r.id = ${id}`
  return row ? toRelay(row) : null
}

/** The live relay of `publicKey` for the key (the same request again), in the caller's transaction. */
export async function liveRelayOf(tx: Tx, keyId: string, publicKey: string): Promise<string | null> {
  const [row] = await tx<{ id: string }[]>`select id from relays where key_id = ${keyId} and public_key = ${publicKey} and deleted_at is null`
  return row?.id ?? null
}

/** A live relay of the account, for DELETE: its key (to lock first). */
export async function relayKey(sql: Sql, accountId: string, id: string): Promise<string | null> {
  const [row] = await sql<{ key_id: string }[]>`select key_id from relays where id = ${id} and account_id = ${accountId} and deleted_at is null`
  return row?.key_id ?? null
}

export interface NewRelay {
  id: string
  accountId: string
  keyId: string
  productId: string
  name: string
  publicKey: string
  fingerprint: string
  components: Record<string, string>
  seats: number
  leaseSeconds: number
  ttlSeconds: number
  licenseId: string
  issuedAt: Date
  expiresAt: Date
}

export async function insertRelay(tx: Tx, r: NewRelay): Promise<Relay> {
  await tx`insert into relays (id, account_id, key_id, product_id, name, public_key, device_fingerprint, components, seats,
      lease_seconds, ttl_seconds, license_id, issued_at, expires_at)
    values (${r.id}, ${r.accountId}, ${r.keyId}, ${r.productId}, ${r.name}, ${r.publicKey}, ${r.fingerprint},
            ${tx.json(r.components as JSONValue)}, ${r.seats}, ${r.leaseSeconds}, ${r.ttlSeconds}, ${r.licenseId}, ${r.issuedAt}, ${r.expiresAt})`
  return (await findRelay(tx, r.id))!
}

/** The same request again: the request's machine and name, the call's terms, a renewed license. */
export async function updateRelay(
  tx: Tx,
  id: string,
  r: Pick<NewRelay, 'name' | 'fingerprint' | 'components' | 'seats' | 'leaseSeconds' | 'ttlSeconds' | 'issuedAt' | 'expiresAt'>,
): Promise<Relay> {
  await tx`update relays set name = ${r.name}, device_fingerprint = ${r.fingerprint}, components = ${tx.json(r.components as JSONValue)},
      seats = ${r.seats}, lease_seconds = ${r.leaseSeconds}, ttl_seconds = ${r.ttlSeconds}, issued_at = ${r.issuedAt},
      expires_at = ${r.expiresAt}, updated_at = now()
    where id = ${id}`
  return (await findRelay(tx, id))!
}

/** Marks a live relay of the key deleted; null when it is not (any more) live. */
export async function deleteRelay(tx: Tx, keyId: string, id: string): Promise<Relay | null> {
  const [row] = await tx<{ id: string }[]>`update relays set deleted_at = now(), updated_at = now()
    where id = ${id} and key_id = ${keyId} and deleted_at is null returning id`
  return row ? findRelay(tx, id) : null
}

/** What a check-in needs: the relay (deleted ones too), its key's effective state and terms. */
export interface CheckInState {
  id: string
  account_id: string
  key_id: string
  product_id: string
  public_key: string
  device_fingerprint: string
  license_id: string
  seats: number
  lease_seconds: number
  ttl_seconds: number
  deleted: boolean
  key_status: 'active' | 'revoked' | 'suspended' | 'expired'
  key_expires_at: Date | null
  expiry_refused: boolean
  plan: string | null
  grace_seconds: number
  after_expiry: 'refuse' | 'keep'
  entitlements: Record<string, true | number | string>
}

export async function checkInState(sql: Sql, id: string): Promise<CheckInState | null> {
  const [row] = await sql<CheckInState[]>`select r.id, r.account_id, r.key_id, r.product_id, r.public_key, r.device_fingerprint,
      r.license_id, r.seats, r.lease_seconds, r.ttl_seconds, r.deleted_at is not null as deleted,
      key_effective_status(k.status, k.expires_at, k.suspended_at) as key_status, k.expires_at as key_expires_at,
      ${expiryRefused(sql)} as expiry_refused, ${effectiveSettings(sql)}
    from relays r join license_keys k on k.id = r.key_id ${joinPolicy(sql)}
    where r.id = ${id}`
  return row ?? null
}

/**
 * Records a check-in: its time and lease count, the day's peak and count of check-ins, and, when the
 * relay is renewed, the license's new issue and expiry (a deleted relay's row is not renewed).
 */
export async function recordCheckIn(
  sql: Sql,
  c: { id: string; at: Date; leases: number; peak: number; renewed: { issuedAt: Date; expiresAt: Date } | null },
): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`update relays set last_check_in_at = greatest(last_check_in_at, ${c.at}), last_leases = ${c.leases}
      ${c.renewed ? tx`, issued_at = ${c.renewed.issuedAt}, expires_at = ${c.renewed.expiresAt}` : tx``}
      where id = ${c.id}`
    await tx`insert into relay_usage (relay_id, day, peak, check_ins)
      values (${c.id}, (${c.at}::timestamptz at time zone 'UTC')::date, ${c.peak}, 1)
      on conflict (relay_id, day) do update set peak = greatest(relay_usage.peak, excluded.peak), check_ins = relay_usage.check_ins + 1`
  })
}

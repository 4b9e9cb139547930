// The record of metered keys' credits: all the SQL on a key's balance (the license_keys credits_*
// columns and the credit_leases rows). Taking credits for a node's lease, giving them back, an admin
// change, a PATCH, and what a key shows all go through here, with one refill step (`refilled`) and
// one rule for which leases still count (`liveLease`). Events are not emitted here: service.ts emits
// them in the same transaction (docs/architecture.md, "Metered keys: credit leases").
import type { JSONValue } from 'postgres'
import { applyRefills, MAX_CREDITS, type RefillRule } from '../../core/credits'
import type { Sql, Tx } from '../../infra/db'
import type { Credits } from './model'

/** A lease row counts while its node keeps writing it (every FLUSH_INTERVAL_MS); older, its node is gone. */
export const LIVE_LEASE = '15 seconds'

/**
 * The one live-lease predicate: a lease row `l` of the key's current `epoch` (a `set` voids the older
 * ones) that its node wrote within LIVE_LEASE. `epoch` is a value or a column of the query.
 */
const liveLease = (sql: Sql | Tx, epoch: ReturnType<Sql> | number) =>
  sql`l.epoch = ${epoch} and l.updated_at > now() - ${LIVE_LEASE}::interval`

/** Unspent credits the live nodes hold in leases of key `k` (for the key's columns). */
export const leasedOf = (sql: Sql | Tx) => sql`(select coalesce(sum(l.held), 0) from credit_leases l
  where l.key_id = k.id and ${liveLease(sql, sql`k.credits_epoch`)})`

/** A balance after the one refill step: the refills due by `now` applied to the record. */
export interface Refilled {
  record: number
  /** the last refill boundary applied (unchanged when none passed) */
  since: Date
  /** the next refill (epoch ms); null without a refill rule */
  refillsAt: number | null
}

/**
 * The one refill step (core/credits.ts computes it from the period boundary): `outstanding` is what
 * leases hold unspent, which a top-up counts as held. Applied wherever the record is locked (a take,
 * an admin change) and, without writing, on a read.
 */
export function refilled(record: number, rule: RefillRule | null, since: Date, now: number, outstanding: number): Refilled {
  const r = applyRefills(record, rule, since.getTime(), now, outstanding)
  return r === null ? { record, since, refillsAt: null } : { record: r.remaining, since: new Date(r.since), refillsAt: r.refillsAt }
}

export interface CreditsState {
  /** the key's value hash (for the bus message that recalls its leases) */
  keyHash: string
  remaining: number | null
  refill: RefillRule | null
  since: Date
  epoch: number
  debt: number
  /** unspent credits in live leases */
  leased: number
  exhausted: boolean
}

/** Locks the key row (of this account) and reads its credits; null when there is no such key. */
export async function lockCredits(tx: Tx, accountId: string, id: string): Promise<CreditsState | null> {
  const [r] = await tx<{ key_hash: string; remaining: string | null; refill: RefillRule | null; since: Date | null; epoch: number; debt: string; leased: string; exhausted: boolean }[]>`
    select k.key_hash, k.credits_remaining as remaining, k.credits_refill as refill, k.credits_since as since, k.credits_epoch as epoch,
      k.credits_debt as debt, k.credits_exhausted as exhausted, ${leasedOf(tx)} as leased
    from license_keys k where k.id = ${id} and k.account_id = ${accountId} for update of k`
  if (!r) return null
  return {
    keyHash: r.key_hash,
    remaining: r.remaining === null ? null : Number(r.remaining),
    refill: r.refill,
    since: r.since ?? new Date(),
    epoch: r.epoch,
    debt: Number(r.debt),
    leased: Number(r.leased),
    exhausted: r.exhausted,
  }
}

/**
 * New credit values for a locked key. key.credits_exhausted is for a consume that reaches 0: an admin
 * change to 0 counts as sent (`exhausted`), a balance above 0 re-arms it.
 */
export async function writeCredits(
  tx: Tx,
  id: string,
  c: { remaining: number; debt: number; epoch: number; since: Date; clearLeases: boolean; exhausted: boolean },
): Promise<void> {
  await tx`update license_keys set credits_remaining = ${c.remaining}, credits_debt = ${c.debt}, credits_epoch = ${c.epoch},
      credits_since = ${c.since}, credits_exhausted = ${c.exhausted}, updated_at = now()
    where id = ${id}`
  if (c.clearLeases) await tx`delete from credit_leases where key_id = ${id}`
}

/** PATCH credits: a new balance and rule (the refill period counts from now), or unmetered; leases out are void. */
export async function replaceCredits(tx: Tx, id: string, c: { remaining: number; refill: RefillRule | null } | null): Promise<void> {
  await tx`update license_keys set credits_remaining = ${c?.remaining ?? null},
      credits_refill = ${c?.refill ? tx.json(c.refill as unknown as JSONValue) : null},
      credits_since = ${c ? new Date() : null}, credits_epoch = credits_epoch + 1, credits_debt = 0,
      credits_exhausted = ${c?.remaining === 0}, updated_at = now()
    where id = ${id}`
  await tx`delete from credit_leases where key_id = ${id}`
}

export type Taken =
  | { kind: 'unmetered' }
  /** `taken` credits moved from the record to the lease (0: the record had less than `need`) */
  | { kind: 'taken'; keyId: string; epoch: number; taken: number; record: number; refillsAt: number | null }

/** What a take asks for: see `takeCredits`. */
export interface Take {
  keyHash: string
  nodeId: string
  leaseId: string
  held: number
  need: number
  want: number
  now: number
}

/**
 * Takes between `need` and `want` credits of the key with this hash for lease `leaseId`, at most a
 * quarter of the record past `need` (so near zero the last credits go `need` at a time, exactly),
 * applying the refills due first. Nothing when the record holds less than `need`. `exhausted` is the
 * key to announce (key.credits_exhausted, service.ts) when this leaves nothing anywhere (the record,
 * the live leases, and this lease once `need` is spent) and it was not sent since the balance was
 * last above 0.
 */
export async function takeCredits(tx: Tx, p: Take): Promise<{ taken: Taken; exhausted: { accountId: string; keyId: string } | null }> {
  const [k] = await tx<{ id: string; account_id: string; remaining: string | null; refill: RefillRule | null; since: Date | null; epoch: number; exhausted: boolean }[]>`
    select id, account_id, credits_remaining as remaining, credits_refill as refill, credits_since as since, credits_epoch as epoch,
      credits_exhausted as exhausted
    from license_keys where key_hash = ${p.keyHash} for update`
  if (!k || k.remaining === null) return { taken: { kind: 'unmetered' }, exhausted: null }
  const [{ others }] = await tx<{ others: string }[]>`select coalesce(sum(l.held), 0) as others from credit_leases l
    where l.key_id = ${k.id} and l.id <> ${p.leaseId} and ${liveLease(tx, k.epoch)}`
  const held = Number(others) + p.held
  const due = refilled(Number(k.remaining), k.refill, k.since ?? new Date(p.now), p.now, held)
  const record = due.record
  const taken = record < p.need ? 0 : Math.min(p.want, Math.max(p.need, Math.floor(record / 4)), record)
  const left = record - taken
  // this lease once the call it serves has spent (a refused call spends nothing)
  const after = taken > 0 ? taken - p.need : p.held
  // need 0 (a cost-0 call on a node that has not taken yet) only reads the balance: it never announces
  const none = p.need > 0 ? left === 0 && Number(others) === 0 && after === 0 : k.exhausted
  await tx`update license_keys set credits_remaining = ${left}, credits_exhausted = ${none},
      credits_since = ${k.refill === null ? k.since : due.since}
    where id = ${k.id}`
  if (taken > 0) {
    await tx`insert into credit_leases (id, key_id, node_id, epoch, held) values (${p.leaseId}, ${k.id}, ${p.nodeId}, ${k.epoch}, ${after})
      on conflict (id) do update set held = excluded.held, updated_at = now()`
  }
  return {
    taken: { kind: 'taken', keyId: k.id, epoch: k.epoch, taken, record: left, refillsAt: due.refillsAt },
    exhausted: p.need > 0 && none && !k.exhausted ? { accountId: k.account_id, keyId: k.id } : null,
  }
}

/**
 * Gives a lease's unspent credits back to the record (a subtract's debt first) and ends the lease;
 * a lease of an older epoch (a `set` came since) gives nothing back: its credits are void.
 */
export async function returnCredits(sql: Sql, p: { keyId: string; leaseId: string; epoch: number; unspent: number }): Promise<void> {
  await sql.begin(async (tx) => {
    if (p.unspent > 0) {
      await tx`update license_keys set credits_remaining = least(${MAX_CREDITS}, credits_remaining + greatest(0, ${p.unspent} - credits_debt)),
          credits_debt = greatest(0, credits_debt - ${p.unspent}),
          credits_exhausted = credits_exhausted and credits_remaining + greatest(0, ${p.unspent} - credits_debt) = 0
        where id = ${p.keyId} and credits_epoch = ${p.epoch} and credits_remaining is not null`
    }
    await tx`delete from credit_leases where id = ${p.leaseId}`
  })
}

/** What each of this node's leases still holds (GET /v1/keys/:id adds it to the record); keeps them live. */
export async function reportLeases(sql: Sql, leases: { id: string; held: number }[]): Promise<void> {
  if (leases.length === 0) return
  await sql`update credit_leases l set held = v.held, updated_at = now()
    from (select unnest(${leases.map((l) => l.id)}::text[]) as id, unnest(${leases.map((l) => l.held)}::bigint[]) as held) v
    where l.id = v.id`
}

/** Credits consumed, per account, UTC day, product and key (the analytics' credits chart). */
export async function addConsumed(sql: Sql, counted: { account: string; day: string; product: string; key: string; n: number }[]): Promise<void> {
  // one row per (account, day, product, key): an upsert may not touch a row twice
  const byKey = new Map<string, { account: string; day: string; product: string; key: string; n: number }>()
  for (const c of counted) {
    const id = `${c.account} ${c.day} ${c.product} ${c.key}`
    const seen = byKey.get(id)
    if (seen) seen.n += c.n
    else byKey.set(id, { ...c })
  }
  const rows = [...byKey.values()].filter((r) => r.n !== 0)
  if (rows.length === 0) return
  await sql`insert into analytics_daily_credits as d (account_id, day, product_id, key_id, consumed)
    select * from unnest(${rows.map((r) => r.account)}::text[], ${rows.map((r) => r.day)}::date[], ${rows.map((r) => r.product)}::text[],
      ${rows.map((r) => r.key)}::text[], ${rows.map((r) => r.n)}::bigint[])
    on conflict (account_id, day, product_id, key_id) do update set consumed = d.consumed + excluded.consumed`
}

/** The stored columns of a key's credits (read with `leasedOf`). */
export interface CreditsColumns {
  credits_remaining: number | string | null
  credits_refill: RefillRule | null
  credits_since: Date | null
  credits_debt: number | string
  /** unspent credits the live nodes hold in leases */
  credits_leased: number | string
}

/**
 * What a key shows: the record with the refills due by now (not written: the next write applies
 * them), plus what nodes hold unspent, less a subtract's debt not yet paid by their returns.
 */
export function creditsView(c: CreditsColumns, now = Date.now()): Credits {
  if (c.credits_remaining === null) return null
  const leased = Number(c.credits_leased)
  const due = refilled(Number(c.credits_remaining), c.credits_refill, c.credits_since ?? new Date(now), now, leased)
  const remaining = Math.max(0, Math.min(MAX_CREDITS, due.record + leased - Number(c.credits_debt)))
  return {
    remaining,
    refill: c.credits_refill,
    refills_at: due.refillsAt === null ? null : new Date(due.refillsAt).toISOString(),
  }
}

// The record side of credit leases (credit-leases.ts): taking credits from a key's balance under its
// row lock, giving the rest back, and writing what each lease still holds.
import { applyRefills, MAX_CREDITS, type RefillRule } from '../../core/credits'
import type { Sql } from '../../infra/db'
import { DEVICE, emit } from '../events/outbox'
import { LIVE_LEASE } from '../keys/credits-repo'
import { findKey } from '../keys/repo'

export type Taken =
  | { kind: 'unmetered' }
  /** `taken` credits moved from the record to the lease (0: the record had less than `need`) */
  | { kind: 'taken'; keyId: string; epoch: number; taken: number; record: number; refillsAt: number | null }

/**
 * Takes between `need` and `want` credits of the key with this hash for lease `leaseId`, at most a
 * quarter of the record past `need` (so near zero the last credits go `need` at a time, exactly),
 * applying the refills due first. Nothing when the record holds less than `need`. Emits
 * key.credits_exhausted when this leaves nothing anywhere (the record, the live leases, and this
 * lease once `need` is spent) and it was not sent since the balance was last above 0.
 */
export async function takeCredits(
  sql: Sql,
  p: { keyHash: string; nodeId: string; leaseId: string; held: number; need: number; want: number; now: number },
): Promise<Taken> {
  return sql.begin(async (tx) => {
    const [k] = await tx<{ id: string; account_id: string; remaining: string | null; refill: RefillRule | null; since: Date | null; epoch: number; exhausted: boolean }[]>`
      select id, account_id, credits_remaining as remaining, credits_refill as refill, credits_since as since, credits_epoch as epoch,
        credits_exhausted as exhausted
      from license_keys where key_hash = ${p.keyHash} for update`
    if (!k || k.remaining === null) return { kind: 'unmetered' } as const
    const [{ others }] = await tx<{ others: string }[]>`select coalesce(sum(held), 0) as others from credit_leases
      where key_id = ${k.id} and id <> ${p.leaseId} and epoch = ${k.epoch} and updated_at > now() - ${LIVE_LEASE}::interval`
    const held = Number(others) + p.held
    const refilled = applyRefills(Number(k.remaining), k.refill, (k.since ?? new Date(p.now)).getTime(), p.now, held)
    const record = refilled?.remaining ?? Number(k.remaining)
    const taken = record < p.need ? 0 : Math.min(p.want, Math.max(p.need, Math.floor(record / 4)), record)
    const left = record - taken
    // this lease once the call it serves has spent (a refused call spends nothing)
    const after = taken > 0 ? taken - p.need : p.held
    // need 0 (a cost-0 call on a node that has not taken yet) only reads the balance: it never emits
    const none = p.need > 0 ? left === 0 && Number(others) === 0 && after === 0 : k.exhausted
    await tx`update license_keys set credits_remaining = ${left}, credits_exhausted = ${none},
        credits_since = ${refilled ? new Date(refilled.since) : k.since}
      where id = ${k.id}`
    if (taken > 0) {
      await tx`insert into credit_leases (id, key_id, node_id, epoch, held) values (${p.leaseId}, ${k.id}, ${p.nodeId}, ${k.epoch}, ${after})
        on conflict (id) do update set held = excluded.held, updated_at = now()`
    }
    if (p.need > 0 && none && !k.exhausted) await emit(tx, k.account_id, 'key.credits_exhausted', (await findKey(tx, k.account_id, k.id))!, DEVICE)
    return { kind: 'taken', keyId: k.id, epoch: k.epoch, taken, record: left, refillsAt: refilled?.refillsAt ?? null } as const
  })
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

// How many seats a key's live relays hold (docs/api.md, "Relays"): read by every seat decision
// (repo.ts takeSeat, relay-seats.ts) under the key's row lock, and by the reads that show
// activations_used (the key object, the hot state).
import type { Sql, Tx } from '../../infra/db'

/** The seats the key's live relays hold (exact when the key row is locked). */
export async function relaySeatsOf(sql: Sql | Tx, keyId: string, exceptRelayId: string | null = null): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`select coalesce(sum(seats), 0)::int as n from relays
    where key_id = ${keyId} and deleted_at is null ${exceptRelayId === null ? sql`` : sql`and id <> ${exceptRelayId}`}`
  return n
}

/** The seats of `k`'s live relays, for a select over `license_keys k`. */
export const relaySeatsColumn = (sql: Sql | Tx) =>
  sql`(select coalesce(sum(r.seats), 0)::int from relays r where r.key_id = k.id and r.deleted_at is null)`

// Cluster membership and progress in Postgres (sql/012_cluster_nodes.sql): the one membership, read by
// writers (publish-and-wait) and the barrier, so a writer knows which nodes may hold memory even while
// NATS is down or was just restarted (NATS alone would know only the nodes heard since it reconnected).
import type { Sql } from './db'

/**
 * Renews this node's row with what it has seen, and whether it can send key emails (sql/033: /readyz
 * warns on a node without mail in a cluster whose other nodes have it); returns the change sequence's
 * value, read after.
 */
export async function beat(sql: Sql, node: string, seenSeq: number, canMail = false): Promise<number> {
  const [row] = await sql<{ v: string }[]>`select cluster_beat(${node}, ${seenSeq}, ${canMail})::text as v`
  return Number(row!.v)
}

/** Whether another node that renewed within `windowMs` can send key emails. */
export async function othersCanMail(sql: Sql, windowMs: number): Promise<boolean> {
  const [row] = await sql<{ yes: boolean }[]>`select exists (select 1 from cluster_nodes
    where can_mail and heard_at > clock_timestamp() - make_interval(secs => ${windowMs / 1000})) as yes`
  return row!.yes
}

/**
 * After a commit: the change's number, and the other nodes that renewed within `windowMs`.
 *
 * Its own commit does not wait for the WAL flush (`synchronous_commit = off` for this statement): the
 * row locks it takes matter only while it runs, and the sequence's advance is flushed with the next
 * durable commit, within wal_writer_delay at most. Postgres crashing inside that window can hand a
 * number out again; every node notices the sequence behind what it has received at its next renewal
 * and drops its memory (trust.ts, `rewound`). The flush was most of this call: p50 0.9 → 0.3 ms, p99
 * 3.4 → 1.3 ms here (docs/performance.md, "Cluster").
 */
export async function announce(sql: Sql, node: string, windowMs: number): Promise<{ seq: number; members: string[] }> {
  const [row] = await sql<{ seq: string; members: string[] }[]>`
    select seq::text, members, set_config('synchronous_commit', 'off', true) from cluster_announce(${node}, ${windowMs})`
  return { seq: Number(row!.seq), members: row!.members }
}

/** Of `nodes`, those still registered whose memory has not yet seen change `seq`. */
export async function notYetSeen(sql: Sql, nodes: string[], seq: number): Promise<Set<string>> {
  const rows = await sql<{ id: string }[]>`select id from cluster_nodes where id = any(${nodes}) and seen_seq < ${seq}`
  return new Set(rows.map((r) => r.id))
}

/** A node that stops (after it stopped serving) leaves at once instead of when its row goes stale. */
export async function leave(sql: Sql, node: string): Promise<void> {
  await sql`delete from cluster_nodes where id = ${node}`
}

/** The other nodes that renewed within `windowMs`: those that may be serving (and batching) now. */
export async function liveNodes(sql: Sql, node: string, windowMs: number): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`select id from cluster_nodes
    where id <> ${node} and heard_at > clock_timestamp() - make_interval(secs => ${windowMs / 1000})`
  return rows.map((r) => r.id)
}

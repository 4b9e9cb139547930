// The audit trail: an account's events, newest first (the order they were written: `seq`).
import type { Sql } from '../../infra/db'
import { iso } from '../../core/values'
import type { AuditEvent } from './model'

type Row = { id: string; type: string; created_at: Date; actor_type: AuditEvent['actor']['type']; actor_id: string | null; data: unknown; total: number }

export async function listEvents(
  sql: Sql,
  accountId: string,
  filter: { type?: string; resourceId?: string; since?: Date; page: number; pageSize: number },
): Promise<{ events: AuditEvent[]; total: number }> {
  const where = sql`account_id = ${accountId}
    ${filter.type === undefined ? sql`` : sql`and type = ${filter.type}`}
    ${filter.resourceId === undefined ? sql`` : sql`and resource_ids @> array[${filter.resourceId}]::text[]`}
    ${filter.since === undefined ? sql`` : sql`and created_at >= ${filter.since}`}`
  const [rows, [count]] = await Promise.all([
    sql<Row[]>`select id, type, created_at, actor_type, actor_id, data from events where ${where}
      order by seq desc limit ${filter.pageSize} offset ${filter.page * filter.pageSize}`,
    sql<{ n: number }[]>`select count(*)::int as n from events where ${where}`,
  ])
  return {
    events: rows.map((r) => ({ id: r.id, type: r.type, created_at: iso(r.created_at)!, actor: { type: r.actor_type, id: r.actor_id }, data: r.data })),
    total: count!.n,
  }
}

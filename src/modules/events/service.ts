import type { Deps } from '../../deps'
import type { Principal } from '../../core/principal'
import { parseInstant } from '../../core/values'
import type { ListEventsQuery } from './model'
import * as repo from './repo'

/** GET /v1/events: the account's audit trail, newest first; `since` is inclusive. */
export async function listEvents(deps: Deps, who: Principal, query: ListEventsQuery) {
  const page = query.page ?? 0
  const pageSize = query.page_size ?? 20
  const since = query.since === undefined ? undefined : parseInstant('query.since', query.since)
  const { events, total } = await repo.listEvents(deps.sql, who.accountId, {
    type: query.type,
    resourceId: query.resource_id,
    since,
    page,
    pageSize,
  })
  return { data: events, page, page_size: pageSize, total, has_more: (page + 1) * pageSize < total }
}

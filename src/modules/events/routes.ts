import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth } from '../../http/responses'
import { EventPage, ListEventsQuery } from './model'
import * as service from './service'

export function eventRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.events', prefix: '/v1', detail: { tags: ['Events'] } })
    .use(authPlugin(deps.principals))
    .guard({ auth: 'full_access', response: behindAuth() }, (events) =>
      events.get('/events', ({ principal, query }) => service.listEvents(deps, principal, query), {
        query: ListEventsQuery,
        response: { 200: EventPage },
        detail: { summary: 'The audit trail: every change, who made it (actor) and its data, newest first' },
      }),
    )
}

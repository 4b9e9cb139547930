// Liveness and readiness for load balancers and orchestrators, metrics for Prometheus.
import { Elysia } from 'elysia'
import { canMail } from '../../config'
import type { Deps } from '../../deps'
import { problems } from '../../http/responses'
import { t } from '../../http/schema'
import { isDraining } from '../../http/drain'
import { othersCanMail } from '../../infra/cluster-nodes'
import { registry } from '../../infra/metrics'

const DepState = t.Union([t.Literal('ok'), t.Literal('down'), t.Literal('embedded')])
const Readiness = t.Object({
  postgres: DepState,
  nats: DepState,
  redis: DepState,
  warnings: t.Optional(
    t.Array(t.String(), { description: 'Present only when there is something to fix that does not make the node unready, e.g. no SMTP_URL here while other nodes have it' }),
  ),
})

/** Other nodes count as live for the mail warning when they renewed their membership this recently. */
const LIVE_WINDOW_MS = 30_000

export function opsRoutes(deps: Deps) {
  return new Elysia({ name: 'keyward.ops', detail: { tags: ['Operations'] } })
    .get('/healthz', () => ({ status: 'ok' as const }), {
      response: { 200: t.Object({ status: t.Literal('ok') }) },
      detail: { summary: 'Liveness: 200 while the process runs, whatever the query string' },
    })
    .get(
      '/readyz',
      async ({ set, server }) => {
        const postgres = deps.db.kind === 'embedded' ? 'embedded' : (await deps.db.ping()) ? 'ok' : 'down'
        const nats = deps.bus.state()
        const redis = deps.counters.state()
        // Redis down leaves the node fully able to answer (it counts locally), so it stays ready;
        // without Postgres or the bus it could serve stale answers or fail writes.
        // A draining node (shutting down) is not ready: balancers stop sending it new requests.
        const ready = postgres !== 'down' && nats !== 'down' && !isDraining(server)
        set.status = ready ? 200 : 503
        const warnings: string[] = []
        // A node without mail still issues keys, but the buyers whose purchase it handles get no email
        // while the other nodes' buyers do: worth an operator's look, not worth taking the node out.
        if (!canMail(deps.config) && deps.db.kind !== 'embedded' && postgres === 'ok') {
          if (await othersCanMail(deps.sql, LIVE_WINDOW_MS).catch(() => false)) {
            warnings.push('no SMTP_URL/MAIL_FROM on this node while other nodes have them: keys paid through it are not emailed')
          }
        }
        return warnings.length > 0 ? { postgres, nats, redis, warnings } : { postgres, nats, redis }
      },
      {
        // 400: a NUL in the query (the kernel refuses it before routing).
        response: { 200: Readiness, 503: Readiness, ...problems(400) },
        detail: { summary: 'Readiness: each dependency ok, down or embedded, and warnings that do not make the node unready' },
      },
    )
    .get(
      '/metrics',
      async () =>
        new Response(await registry.metrics(), { headers: { 'content-type': registry.contentType } }),
      {
        response: { 200: t.String({ description: 'Prometheus text exposition format' }), ...problems(400) },
        detail: { summary: 'Prometheus metrics (text exposition format)' },
      },
    )
}

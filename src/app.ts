// The composition root of the HTTP application: the kernel (ids, limits, errors, logs), the docs,
// and every feature module's routes over one set of dependencies. Only node.ts imports this file.
import { Elysia } from 'elysia'
import { consoleRoutes } from './console/serve'
import type { Deps } from './deps'
import { clientAnswers } from './http/client-answers'
import { docs } from './http/docs'
import { answerLog, kernel } from './http/kernel'
import { routeOnParsedPath } from './http/request-path'
import { adminRoutes } from './modules/accounts/routes'
import { activationRoutes } from './modules/activations/routes'
import { airGappedRoutes, portalRoutes } from './modules/air-gapped/routes'
import { PortalGate } from './modules/air-gapped/portal'
import { portalPage } from './portal/serve'
import { analyticsRoutes } from './modules/analytics/routes'
import type { Principals } from './modules/api-keys/principals'
import { apiKeyRoutes } from './modules/api-keys/routes'
import type { Mailer } from './modules/connectors/mailer'
import { connectorRoutes, HOOK_BODY_LIMIT, HOOK_PREFIX, hookRoutes } from './modules/connectors/routes'
import { eventRoutes } from './modules/events/routes'
import { MAX_IMPORT_BYTES } from './modules/keys/import-parse'
import { keyRoutes } from './modules/keys/routes'
import { Key } from './modules/keys/model'
import { findKey } from './modules/keys/repo'
import { creditRoutes } from './modules/credits/routes'
import { offlineRoutes } from './modules/offline/routes'
import { opsRoutes } from './modules/ops/routes'
import { productRoutes } from './modules/products/routes'
import { policyRoutes } from './modules/policies/routes'
import { CHECK_IN_BODY_LIMIT, RELAYS_PREFIX, relayCheckInRoutes, relayRoutes } from './modules/relays/routes'
import { Signers } from './modules/signing/signers'
import { signingRoutes } from './modules/signing/routes'
import { validationRoutes, validationServeRoutes } from './modules/validation/routes'
import type { ValidationEngine } from './modules/validation/service'
import { WEBHOOK_EVENTS } from './modules/webhooks/model'
import { webhookRoutes } from './modules/webhooks/routes'

/** Deps as a node builds them (node.ts, buildDeps): with the services it shares, by their own types. */
export interface NodeDeps extends Deps {
  readonly principals: Principals
  /** One engine per node: the validate routes (both doors) and the node's last-seen flush job. */
  readonly validation: ValidationEngine
  /** The payment connectors' key emails (a no-op without SMTP_URL). */
  readonly mailer: Mailer
}

/** The routes whose body limit is not the kernel's 64 KiB: the sync route takes 100 licenses (docs/api.md, "Offline licenses"), an import 8 MiB. */
const BODY_LIMITS: ReadonlyMap<string, number> = new Map([
  ['/v1/offline-licenses/sync', 256 * 1024],
  ['/v1/keys/import', MAX_IMPORT_BYTES],
])
/** The routes whose JSON body arrives as text too: the import reads `{rows}` in slices (keys/import-json.ts). */
const TEXT_BODIES: ReadonlySet<string> = new Set(['/v1/keys/import'])
/** The routes whose body arrives as raw bytes: a payment provider's and a relay's signature is over the exact body. */
const RAW_BODIES: ReadonlyMap<string, number> = new Map([
  [HOOK_PREFIX, HOOK_BODY_LIMIT],
  [RELAYS_PREFIX, CHECK_IN_BODY_LIMIT],
])

export function createApp(deps: NodeDeps) {
  // POST /v1/validate is served by Bun's router straight into the validation engine (see
  // modules/validation/fast-path.ts); Elysia serves every other route and documents that one too.
  // The accounts' Ed25519 keys (root and signing keys), held per node and dropped over the bus like the
  // hot state: offline licenses, signed answers and the key set (modules/signing/signers.ts).
  const signers = new Signers(deps.sql, deps.secretKey, deps.bus, { ttlMs: deps.config.cacheTtlMs, degradedTtlMs: deps.config.degradedTtlMs })
  // The app's routes, for the client-route wrapper (which reads their CLIENT/SIGNED declarations at
  // the first request): set once every module below is mounted.
  let mounted: () => readonly { method: string; path: string }[] = () => []
  // The air-gapped end-user page and its two routes share one set of per-address and per-key limits (modules/air-gapped/portal.ts).
  const portalGate = new PortalGate()
  const app = new Elysia({ name: 'keyward', serve: { routes: validationServeRoutes(deps, deps.validation, signers) } })
    .wrap(routeOnParsedPath as never) // the path, whatever the Host header (see http/request-path.ts)
    // CORS and signed answers on the routes declared CLIENT and SIGNED (http/client-answers.ts; the fast
    // path does its own); the outer wrap, so what it adds reaches the client and its own answers are logged.
    .wrap(clientAnswers({ keys: signers, principals: deps.principals, routes: () => mounted(), log: answerLog(deps.log) }) as never)
    .use(kernel(deps.log, BODY_LIMITS, RAW_BODIES, TEXT_BODIES))
    .use(docs({ events: WEBHOOK_EVENTS }))
    .use(consoleRoutes())
    .use(portalPage(deps.sql, portalGate))
    .use(opsRoutes(deps))
    .use(adminRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(productRoutes(deps))
    .use(policyRoutes(deps))
    .use(keyRoutes(deps))
    .use(creditRoutes(deps, { schema: Key, find: findKey })) // the key's schema and reading are the keys module's
    .use(activationRoutes(deps))
    .use(validationRoutes(deps, deps.validation))
    .use(analyticsRoutes(deps))
    .use(offlineRoutes(deps, signers))
    .use(signingRoutes(deps, signers))
    .use(airGappedRoutes(deps, deps.validation.holders, signers))
    .use(portalRoutes(deps, deps.validation.holders, signers, portalGate))
    .use(relayRoutes(deps, signers))
    .use(relayCheckInRoutes(deps, signers))
    .use(webhookRoutes(deps))
    .use(eventRoutes(deps))
    .use(connectorRoutes(deps))
    .use(hookRoutes(deps, deps.mailer.wake))
  mounted = () => app.routes
  return app
}

export type App = ReturnType<typeof createApp>

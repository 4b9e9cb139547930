// The HTTP application: kernel (ids, limits, errors, logs), docs, and every feature module's routes.
import { Elysia } from 'elysia'
import type { Deps } from '../deps'
import { adminRoutes } from '../modules/accounts/routes'
import { analyticsRoutes } from '../modules/analytics/routes'
import { apiKeyRoutes } from '../modules/api-keys/routes'
import { keyRoutes } from '../modules/keys/routes'
import { productRoutes } from '../modules/products/routes'
import { offlineRoutes } from '../modules/offline/routes'
import { opsRoutes } from '../modules/ops/routes'
import { validationRoutes, validationServeRoutes } from '../modules/validation/routes'
import { WEBHOOK_EVENTS } from '../modules/webhooks/model'
import { webhookRoutes } from '../modules/webhooks/routes'
import { docs } from './docs'
import { kernel } from './kernel'

export function createApp(deps: Deps) {
  // POST /v1/validate is served by Bun's router straight into the validation engine (see
  // modules/validation/fast-path.ts); Elysia serves every other route and documents that one too.
  return new Elysia({ name: 'keyward', serve: { routes: validationServeRoutes(deps) } as never })
    .use(kernel(deps.log))
    .use(docs({ events: WEBHOOK_EVENTS }))
    .use(opsRoutes(deps))
    .use(adminRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(productRoutes(deps))
    .use(keyRoutes(deps))
    .use(validationRoutes(deps))
    .use(analyticsRoutes(deps))
    .use(offlineRoutes(deps))
    .use(webhookRoutes(deps))
}

export type App = ReturnType<typeof createApp>

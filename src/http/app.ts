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
import { webhookRoutes } from '../modules/webhooks/routes'
import { docs } from './docs'
import { kernel } from './kernel'

export function createApp(deps: Deps) {
  return new Elysia({ name: 'keyward' })
    .use(kernel(deps.log))
    .use(docs())
    .use(opsRoutes(deps))
    .use(adminRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(productRoutes(deps))
    .use(keyRoutes(deps))
    .use(analyticsRoutes(deps))
    .use(offlineRoutes(deps))
    .use(webhookRoutes(deps))
}

export type App = ReturnType<typeof createApp>

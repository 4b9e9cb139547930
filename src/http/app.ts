// The HTTP application: kernel (ids, limits, errors, logs), docs, and every feature module's routes.
import { openapi } from '@elysiajs/openapi'
import { Elysia } from 'elysia'
import type { Deps } from '../deps'
import { adminRoutes } from '../modules/accounts/routes'
import { apiKeyRoutes } from '../modules/api-keys/routes'
import { keyRoutes } from '../modules/keys/routes'
import { productRoutes } from '../modules/products/routes'
import { offlineRoutes } from '../modules/offline/routes'
import { opsRoutes } from '../modules/ops/routes'
import { kernel } from './kernel'

export function createApp(deps: Deps) {
  return new Elysia({ name: 'keyward' })
    .use(kernel(deps.log))
    .use(
      openapi({
        path: '/docs',
        specPath: '/docs/json',
        documentation: {
          info: {
            title: 'Keyward API',
            version: '1.0.0',
            description: 'License keys for software vendors: products, keys, validation, webhooks, analytics, offline licenses.',
          },
          components: {
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', description: 'API key: kw_ followed by 32 alphanumerics' },
              admin: { type: 'http', scheme: 'bearer', description: 'Operator token (ADMIN_TOKEN)' },
            },
          },
        },
      }),
    )
    .use(opsRoutes(deps))
    .use(adminRoutes(deps))
    .use(apiKeyRoutes(deps))
    .use(productRoutes(deps))
    .use(keyRoutes(deps))
    .use(offlineRoutes(deps))
}

export type App = ReturnType<typeof createApp>

// What every module may depend on: the adapters (infra/) and who-is-calling, chosen and built once at
// startup (src/node.ts) and passed down. Only interfaces and infra types here: modules import this
// file, so it imports no module (the services modules build are wired by src/app.ts and src/node.ts).
import type { Config } from './config'
import type { Authenticator } from './core/principal'
import type { AccessLog } from './infra/access-log'
import type { Bus } from './infra/bus'
import type { Counters } from './infra/counters'
import type { Db, Sql } from './infra/db'
import type { Logger } from './infra/log'

export interface Deps {
  readonly config: Config
  readonly db: Db
  readonly sql: Sql
  readonly bus: Bus
  readonly counters: Counters
  readonly log: Logger
  /** The access log of the routes served outside the framework (batched; flushed at shutdown). */
  readonly accessLog: AccessLog
  readonly principals: Authenticator
  /** 32-byte key for secrets encrypted at rest (webhook secrets, signing keys). */
  readonly secretKey: Uint8Array
}

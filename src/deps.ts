// Everything a module may depend on, built once at startup (src/node.ts) and passed down.
import type { Config } from './config'
import type { Bus } from './infra/bus'
import type { Counters } from './infra/counters'
import type { Db, Sql } from './infra/db'
import type { Logger } from './infra/log'
import type { Principals } from './modules/api-keys/principals'

export interface Deps {
  readonly config: Config
  readonly db: Db
  readonly sql: Sql
  readonly bus: Bus
  readonly counters: Counters
  readonly log: Logger
  readonly principals: Principals
  /** 32-byte key for secrets encrypted at rest (webhook secrets, signing keys). */
  readonly secretKey: Uint8Array
}

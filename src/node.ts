// One Keyward node: adapters chosen once from the config, the HTTP app, background jobs, shutdown.
import { canMail, type Config } from './config'
import { createApp, type App, type NodeDeps } from './app'
import { drain } from './http/drain'
import { LocalBus, type Bus } from './infra/bus'
import { MemoryCounters, type Counters } from './infra/counters'
import { connectPostgres, startEmbedded, type Db } from './infra/db'
import { AccessLog } from './infra/access-log'
import { createLogger, type Logger } from './infra/log'
import { migrate } from './infra/migrate'
import { NatsBus } from './infra/nats-bus'
import { RedisCounters } from './infra/redis-counters'
import { resolveSecretKey } from './infra/secret-key'
import { Principals } from './modules/api-keys/principals'
import { countAccounts } from './modules/accounts/repo'
import { createAccount } from './modules/accounts/service'
import { sweepExpiredKeys } from './modules/keys/expiry-sweeper'
import { reinstateDueKeys } from './modules/keys/reinstate-sweeper'
import { activateDueKeys } from './modules/signing/service'
import { releaseGraceMs, releaseInactiveActivations } from './modules/activations/inactivity-release'
import { pruneExpired, RETENTION_INTERVAL_MS } from './modules/events/retention'
import { ValidationEngine } from './modules/validation/service'
import { Mailer } from './modules/connectors/mailer'
import { pruneConnectorHistory } from './modules/connectors/retention'
import { startDeliveryWorker } from './modules/webhooks/worker'

export interface Node {
  deps: NodeDeps
  app: App
  url: string
  /** The address bound and what it means (the start banner's words), e.g. `HOST=0.0.0.0: every interface: …`. */
  listening: string
  /** Set on the first start of an empty embedded database: the demo account's token (shown once). */
  demoToken: string | null
  stop(): Promise<void>
}

/** A repeating background job that never overlaps itself and logs (not throws) its failures. */
export function every(ms: number, log: Logger, name: string, job: () => Promise<unknown>) {
  let running: Promise<unknown> | null = null
  const timer = setInterval(() => {
    if (running) return
    running = job()
      .catch((err) => log.warn({ job: name, err: String(err) }, 'background job failed'))
      .finally(() => (running = null))
  }, ms)
  return {
    async stop() {
      clearInterval(timer)
      if (running) await running
    },
  }
}

export async function openDb(config: Config): Promise<Db> {
  return config.databaseUrl ? connectPostgres(config.databaseUrl) : startEmbedded(config.dataDir)
}

/** Everything a node shares, built here once and passed down (nothing is built on first use elsewhere). */
export async function buildDeps(config: Config, db: Db, log: Logger): Promise<NodeDeps> {
  // Cluster mode per dependency: NATS for invalidations, Redis for shared counters (see infra/).
  const bus: Bus = config.natsUrl ? await NatsBus.start({ url: config.natsUrl, sql: db.sql, log, trustWindowMs: config.degradedTtlMs, canMail: canMail(config) }) : new LocalBus()
  const counters: Counters = config.redisUrl ? await RedisCounters.start({ url: config.redisUrl, log, sql: db.sql }) : await MemoryCounters.start(db.sql)
  const principals = new Principals(db.sql, bus, config.cacheTtlMs, config.degradedTtlMs)
  const base = { config, db, sql: db.sql, bus, counters, log, accessLog: new AccessLog(log), principals, secretKey: resolveSecretKey(config) }
  return { ...base, validation: new ValidationEngine(base), mailer: new Mailer(base) }
}

/** Every interface (0.0.0.0, ::): the node is reached on this machine at the loopback address. */
export const everyInterface = (host: string) => host === '0.0.0.0' || host === '::' || host === '[::]'
/** The host part of a URL for this machine's own use of the node. */
export const localUrlHost = (host: string) => (everyInterface(host) ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host)
/** What the banner adds to the URL: the address really bound (HOST) and what that means. */
export function listeningOn(host: string) {
  const where = everyInterface(host)
    ? 'every interface: reachable from the network'
    : host === '127.0.0.1' || host === '::1' || host === 'localhost'
      ? 'this machine only; HOST=0.0.0.0 serves the network'
      : 'this address only'
  return `HOST=${host}: ${where}`
}

/** The node could not start (e.g. its port is taken): a message for the operator, not a stack. */
export class StartupError extends Error {}

export async function startNode(config: Config, options: { db?: Db; log?: Logger; port?: number } = {}): Promise<Node> {
  const log = options.log ?? createLogger(config.logLevel)
  const db = options.db ?? (await openDb(config))
  await migrate(db.sql)
  const deps = await buildDeps(config, db, log)

  const app = createApp(deps)
  const port = options.port ?? config.port
  try {
    app.listen({ port, hostname: config.host, reusePort: config.workers > 1 })
  } catch (err) {
    deps.principals.close()
    await deps.validation.close()
    await Promise.allSettled([deps.bus.close(), deps.counters.close(), options.db ? null : db.close()])
    const busy = (err as { code?: string }).code === 'EADDRINUSE'
    throw new StartupError(`Cannot listen on ${config.host}:${port}: ${busy ? 'the port is in use (set PORT to another one)' : String(err)}`)
  }
  const server = app.server!

  // Only once we serve: the demo token is shown once, so a failed start must not consume it.
  let demoToken: string | null = null
  if (config.demoAccount && (await countAccounts(db.sql)) === 0) {
    const { api_key } = await createAccount(db.sql, { name: 'Demo', plan: 'growth' }, deps.secretKey)
    demoToken = api_key.token
  }
  const validation = deps.validation
  const jobs = [
    every(config.flushIntervalMs, log, 'api-key-last-used', () => deps.principals.flush()),
    every(config.flushIntervalMs, log, 'counters', () => deps.counters.flush()),
    every(config.flushIntervalMs, log, 'validation', () => validation.flush()),
    every(config.sweepIntervalMs, log, 'expiry-sweeper', () => sweepExpiredKeys(db.sql)),
    every(config.sweepIntervalMs, log, 'reinstate-sweeper', () => reinstateDueKeys(deps)),
    every(config.sweepIntervalMs, log, 'signing-key-activations', () => activateDueKeys(deps)),
    every(config.sweepIntervalMs, log, 'inactivity-release', () =>
      releaseInactiveActivations(deps, { graceMs: releaseGraceMs(config.flushIntervalMs) })),
    every(RETENTION_INTERVAL_MS, log, 'retention', () => pruneExpired(db.sql, { days: config.retentionDays })),
    every(RETENTION_INTERVAL_MS, log, 'connector-retention', () => pruneConnectorHistory(db.sql, { days: config.retentionDays })),
  ]
  const webhookWorker = await startDeliveryWorker(deps)
  // due key emails (retries, and those another node queued) are looked for every few seconds
  deps.mailer.start(Math.max(config.sweepIntervalMs, 5_000))

  let stopping: Promise<void> | null = null
  return {
    deps,
    app,
    url: `http://${localUrlHost(config.host)}:${server.port}`,
    listening: listeningOn(config.host),
    demoToken,
    stop() {
      stopping ??= (async () => {
        await drain(server) // keep-alive clients move off this node first (Connection: close)
        await server.stop(false) // stop accepting; let in-flight requests finish
        for (const job of jobs) await job.stop()
        await webhookWorker.stop(config.shutdownTimeoutMs / 2) // attempts in flight finish (or resume elsewhere)
        await deps.mailer.stop()
        await deps.principals.flush().catch(() => {})
        deps.principals.close()
        // what validate batched reaches Postgres, and unspent credits go back, before the connection closes
        await validation.close()
        await deps.counters.flush().catch(() => {})
        await deps.counters.close()
        await deps.bus.close()
        if (!options.db) await db.close()
        await deps.accessLog.drain() // the validate route's batched access-log lines, then pino's buffer
        log.flush?.()
      })()
      return stopping
    },
  }
}

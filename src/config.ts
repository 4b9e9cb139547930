// The only place that reads the environment. Parsed once at startup, frozen, passed down as a value.
import { Type as t, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

const Bool = t.Union([t.Literal('true'), t.Literal('false'), t.Literal('1'), t.Literal('0')])
const Int = t.String({ pattern: '^[0-9]+$' })

const Env = t.Object({
  PORT: t.Optional(Int),
  HOST: t.Optional(t.String({ minLength: 1 })),
  DATABASE_URL: t.Optional(t.String({ pattern: '^postgres(ql)?://' })),
  NATS_URL: t.Optional(t.String({ pattern: '^(nats|tls|ws|wss)://' })),
  REDIS_URL: t.Optional(t.String({ pattern: '^rediss?://' })),
  DATA_DIR: t.Optional(t.String({ minLength: 1 })),
  ADMIN_TOKEN: t.Optional(t.String({ minLength: 16 })),
  SECRET_KEY: t.Optional(t.String({ pattern: '^([0-9a-fA-F]{64}|[A-Za-z0-9+/]{43}=)$' })),
  LOG_LEVEL: t.Optional(t.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => t.Literal(l)))),
  COUNTRY_HEADER: t.Optional(t.String({ minLength: 1 })),
  WEBHOOK_ALLOW_PRIVATE_URLS: t.Optional(Bool),
  /** Comma-separated retry delays in ms; the contract's schedule by default. */
  WEBHOOK_RETRY_DELAYS_MS: t.Optional(t.String({ pattern: '^[0-9]+(,[0-9]+)*$' })),
  WEBHOOK_TIMEOUT_MS: t.Optional(Int),
  WORKERS: t.Optional(Int),
  CACHE_TTL_MS: t.Optional(Int),
  CACHE_MAX_KEYS: t.Optional(Int),
  /** Negative entries (unknown keys) held per node, in their own table: they never evict known keys. */
  CACHE_MAX_UNKNOWN_KEYS: t.Optional(Int),
  /** How long a node that lost the bus may answer from memory before reading through to Postgres. */
  DEGRADED_TTL_MS: t.Optional(Int),
  SWEEP_INTERVAL_MS: t.Optional(Int),
  FLUSH_INTERVAL_MS: t.Optional(Int),
  SHUTDOWN_TIMEOUT_MS: t.Optional(Int),
  /** POST /v1/devices and /v1/deactivate: calls a second per account on each node, and the burst allowed. */
  HOLDER_RATE_PER_SECOND: t.Optional(Int),
  HOLDER_RATE_BURST: t.Optional(Int),
  /** Events, webhook deliveries and attempt logs older than this many days are deleted (docs/operations.md, "Retention"). */
  RETENTION_DAYS: t.Optional(Int),
  /** Create a demo account on first start with an empty embedded database (default: on in embedded mode). */
  DEMO_ACCOUNT: t.Optional(Bool),
  /** Payment connectors' key emails: where to send them (smtp:// or smtps://, credentials in the URL). */
  SMTP_URL: t.Optional(t.String({ pattern: '^smtps?://' })),
  /** The From of key emails, e.g. `Acme Licensing <licenses@acme.example>`. */
  MAIL_FROM: t.Optional(t.String({ minLength: 3 })),
  /** A file replacing the key email's built-in template (see docs/payments.md). */
  MAIL_TEMPLATE: t.Optional(t.String({ minLength: 1 })),
  /** Comma-separated retry delays in ms for key emails; 1 min, 5 min, 30 min, 2 h, 6 h, 12 h by default. */
  MAIL_RETRY_DELAYS_MS: t.Optional(t.String({ pattern: '^[0-9]+(,[0-9]+)*$' })),
})

export type Config = Readonly<{
  port: number
  host: string
  databaseUrl: string | null
  natsUrl: string | null
  redisUrl: string | null
  dataDir: string
  adminToken: string | null
  /** 32 bytes; null only until the embedded store generates one under DATA_DIR. */
  secretKey: Uint8Array | null
  logLevel: string
  countryHeader: string
  webhookAllowPrivateUrls: boolean
  webhookRetryDelaysMs: readonly number[]
  webhookTimeoutMs: number
  workers: number
  cacheTtlMs: number
  cacheMaxKeys: number
  cacheMaxUnknownKeys: number
  degradedTtlMs: number
  sweepIntervalMs: number
  flushIntervalMs: number
  shutdownTimeoutMs: number
  holderRatePerSecond: number
  holderRateBurst: number
  retentionDays: number
  demoAccount: boolean
  embedded: boolean
  smtpUrl: string | null
  mailFrom: string | null
  mailTemplate: string | null
  mailRetryDelaysMs: readonly number[]
}>

// 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: seven retries after the first attempt, eight attempts in all.
const CONTRACT_RETRY_DELAYS_MS = [5e3, 3e5, 1.8e6, 7.2e6, 1.8e7, 3.6e7, 3.6e7]

// 1 min, 5 min, 30 min, 2 h, 6 h, 12 h: seven attempts over about 21 hours, then the mail is given up.
const MAIL_RETRY_DELAYS_MS = [6e4, 3e5, 1.8e6, 7.2e6, 2.16e7, 4.32e7]

/** Whether a node can send key emails: SMTP_URL and MAIL_FROM both set (docs/payments.md). */
export const canMail = (config: Pick<Config, 'smtpUrl' | 'mailFrom'>) => Boolean(config.smtpUrl && config.mailFrom)

export class ConfigError extends Error {}

export function parseSecretKey(text: string): Uint8Array {
  const bytes = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64')
  if (bytes.length !== 32) throw new ConfigError('SECRET_KEY must be 32 bytes (64 hex characters or 44 base64 characters)')
  return new Uint8Array(bytes)
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const raw: Record<string, string> = {}
  for (const name of Object.keys(Env.properties)) {
    const v = env[name]
    if (v !== undefined && v !== '') raw[name] = v
  }
  if (!Value.Check(Env, raw)) {
    const problems = [...Value.Errors(Env, raw)].map((e) => `${e.path.slice(1)}: ${e.message}`)
    throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`)
  }
  const e = raw as Static<typeof Env>
  const int = (v: string | undefined, d: number) => (v === undefined ? d : Number.parseInt(v, 10))
  const bool = (v: string | undefined, d: boolean) => (v === undefined ? d : v === 'true' || v === '1')
  const embedded = !e.DATABASE_URL
  if (!embedded && !e.SECRET_KEY) {
    throw new ConfigError('SECRET_KEY is required when DATABASE_URL is set (generate one with: openssl rand -hex 32)')
  }
  const port = int(e.PORT, 3000)
  if (port > 65535) throw new ConfigError('PORT must be at most 65535')
  const workers = int(e.WORKERS, 1)
  if (workers < 1 || workers > 64) throw new ConfigError('WORKERS must be between 1 and 64')
  const holderRatePerSecond = int(e.HOLDER_RATE_PER_SECOND, 50)
  const holderRateBurst = int(e.HOLDER_RATE_BURST, 200)
  if (holderRatePerSecond < 1 || holderRateBurst < 1) throw new ConfigError('HOLDER_RATE_PER_SECOND and HOLDER_RATE_BURST must be at least 1')
  if (e.SMTP_URL && !e.MAIL_FROM) throw new ConfigError('MAIL_FROM is required with SMTP_URL (the From of key emails)')
  const retentionDays = int(e.RETENTION_DAYS, 90)
  if (retentionDays < 1 || retentionDays > 3650) throw new ConfigError('RETENTION_DAYS must be between 1 and 3650')
  return Object.freeze({
    port,
    host: e.HOST ?? '0.0.0.0',
    databaseUrl: e.DATABASE_URL ?? null,
    natsUrl: e.NATS_URL ?? null,
    redisUrl: e.REDIS_URL ?? null,
    dataDir: e.DATA_DIR ?? './data',
    adminToken: e.ADMIN_TOKEN ?? null,
    secretKey: e.SECRET_KEY ? parseSecretKey(e.SECRET_KEY) : null,
    logLevel: e.LOG_LEVEL ?? 'info',
    countryHeader: (e.COUNTRY_HEADER ?? 'cf-ipcountry').toLowerCase(),
    webhookAllowPrivateUrls: bool(e.WEBHOOK_ALLOW_PRIVATE_URLS, false),
    webhookRetryDelaysMs: e.WEBHOOK_RETRY_DELAYS_MS
      ? e.WEBHOOK_RETRY_DELAYS_MS.split(',').map(Number)
      : CONTRACT_RETRY_DELAYS_MS,
    webhookTimeoutMs: int(e.WEBHOOK_TIMEOUT_MS, 15_000),
    workers,
    cacheTtlMs: int(e.CACHE_TTL_MS, 60_000),
    cacheMaxKeys: int(e.CACHE_MAX_KEYS, 1_000_000), // ≈ 140 B per key (one device): about 215 MB of node RSS when full
    cacheMaxUnknownKeys: int(e.CACHE_MAX_UNKNOWN_KEYS, 65_536), // ≈ 100 B per entry: about 6 MB when full; 0 keeps none
    degradedTtlMs: int(e.DEGRADED_TTL_MS, 2_000),
    sweepIntervalMs: int(e.SWEEP_INTERVAL_MS, 1_000),
    flushIntervalMs: int(e.FLUSH_INTERVAL_MS, 1_000),
    shutdownTimeoutMs: int(e.SHUTDOWN_TIMEOUT_MS, 10_000),
    holderRatePerSecond,
    holderRateBurst,
    retentionDays,
    demoAccount: bool(e.DEMO_ACCOUNT, embedded),
    embedded,
    smtpUrl: e.SMTP_URL ?? null,
    mailFrom: e.MAIL_FROM ?? null,
    mailTemplate: e.MAIL_TEMPLATE ?? null,
    mailRetryDelaysMs: e.MAIL_RETRY_DELAYS_MS ? e.MAIL_RETRY_DELAYS_MS.split(',').map(Number) : MAIL_RETRY_DELAYS_MS,
  })
}

// ---- The relay mode (`keyward relay ...`, docs/integrating.md "Floating seats on your customer's network") ----
const RelayEnv = t.Object({
  UPSTREAM_URL: t.Optional(t.String({ pattern: '^https?://[^\\s]+$' })),
  CHECK_IN_SECONDS: t.Optional(Int),
  KEYWARD_MACHINE_ID: t.Optional(t.String({ minLength: 1, maxLength: 256 })),
})

export interface RelayConfig {
  /** Where the relay checks in (the vendor's Keyward), without a trailing slash; null = never (offline). */
  upstreamUrl: string | null
  checkInSeconds: number
  /** A container's identity given by its operator (it becomes the relay's fingerprint). */
  machineId: string | null
}

/** The relay's settings from the environment (the relay needs none of the node's). */
export function loadRelayConfig(env: Record<string, string | undefined> = process.env): Readonly<RelayConfig> {
  const picked = { UPSTREAM_URL: env.UPSTREAM_URL || undefined, CHECK_IN_SECONDS: env.CHECK_IN_SECONDS || undefined, KEYWARD_MACHINE_ID: env.KEYWARD_MACHINE_ID || undefined }
  if (!Value.Check(RelayEnv, picked)) {
    const e = [...Value.Errors(RelayEnv, picked)][0]!
    throw new ConfigError(`Invalid environment: ${e.path.slice(1)} ${e.message}`)
  }
  const seconds = picked.CHECK_IN_SECONDS === undefined ? 300 : Number(picked.CHECK_IN_SECONDS)
  if (seconds < 1) throw new ConfigError('Invalid environment: CHECK_IN_SECONDS must be at least 1')
  return Object.freeze({ upstreamUrl: picked.UPSTREAM_URL?.replace(/\/+$/, '') ?? null, checkInSeconds: seconds, machineId: picked.KEYWARD_MACHINE_ID ?? null })
}

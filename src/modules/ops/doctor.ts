// `bun run keyward doctor` (docs/operations.md, "Doctor"): what a new installation gets wrong, one line
// per check, each `ok`, `warn` or `fail` with the fix. It reads the environment as a node would, opens
// the store (the embedded one only with the server stopped, as every CLI command), and connects once to
// each configured service. Nothing is changed and no secret is printed.
import nodemailer from 'nodemailer'
import { connect as natsConnect } from 'nats'
import Redis from 'ioredis'
import { ConfigError, loadConfig, type Config } from '../../config'
import { open } from '../../infra/crypto'
import { migrationFiles } from '../../infra/migrate'
import { resolveSecretKey } from '../../infra/secret-key'
import { connectPostgres, startEmbedded, type Db } from '../../infra/db'

export type Status = 'ok' | 'warn' | 'fail'
export interface Finding {
  check: string
  status: Status
  detail: string
  /** What to do about a warn or a fail. */
  fix?: string
}

export interface DoctorOptions {
  /** This machine's clock (a test moves it to show the skew check). */
  now?: () => number
  /** How long each service may take to answer, in ms. */
  timeoutMs?: number
}

/** Skew against Postgres's clock: suspensions, expiries, leases and signing-key activations are timed by both. */
export const SKEW_WARN_MS = 1_000
export const SKEW_FAIL_MS = 30_000

const withTimeout = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms).unref?.())])

const message = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300)

/** An ADMIN_TOKEN's weakness, or null: short, few distinct characters, or one character class. */
export function adminTokenWeakness(token: string): string | null {
  if (token.length < 32) return `${token.length} characters (32 or more wanted)`
  if (new Set(token).size < 12) return 'few distinct characters (a repeated or patterned text)'
  const classes = [/[a-z]/, /[A-Z]/, /[0-9]/, /[^A-Za-z0-9]/].filter((r) => r.test(token)).length
  if (classes < 2 && !/^[0-9a-f]+$/i.test(token)) return 'letters of one kind only'
  return null
}

export async function runDoctor(env: Record<string, string | undefined>, opts: DoctorOptions = {}): Promise<Finding[]> {
  const now = opts.now ?? Date.now
  const timeoutMs = opts.timeoutMs ?? 5_000
  const out: Finding[] = []
  const add = (check: string, status: Status, detail: string, fix?: string) => out.push({ check, status, detail, ...(fix ? { fix } : {}) })

  let config: Config
  try {
    config = loadConfig(env)
    add('configuration', 'ok', `the environment loads (${config.embedded ? `embedded store in ${config.dataDir}` : 'external Postgres'})`)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    add('configuration', 'fail', err.message.replaceAll('\n', ' '), 'correct the variables named (docs/operations.md, "Configuration"); the node does not start with them')
    return out
  }

  // ---- SECRET_KEY: set, and the one that sealed what is stored -------------------------------------
  let secretKey: Uint8Array | null = null
  if (config.secretKey) {
    secretKey = config.secretKey
    add('SECRET_KEY', 'ok', 'set (32 bytes)')
  } else {
    secretKey = resolveSecretKey(config)
    add('SECRET_KEY', 'warn', `not set: the embedded store keeps a generated one in ${config.dataDir}/secret.key`,
      'back that file up with the data (a backup opens only with it), or set SECRET_KEY (openssl rand -hex 32) before the first start')
  }

  // ---- ADMIN_TOKEN ----------------------------------------------------------------------------------
  if (!config.adminToken) add('ADMIN_TOKEN', 'ok', 'not set: the operator routes (/admin) are off; the CLI does their work')
  else {
    const weak = adminTokenWeakness(config.adminToken)
    if (weak) add('ADMIN_TOKEN', 'warn', `weak: ${weak}`, 'use a random one: openssl rand -hex 32')
    else add('ADMIN_TOKEN', 'ok', `${config.adminToken.length} characters, varied`)
  }

  // ---- Postgres: reachable, version, clock, migrations, sealed values -------------------------------
  let db: Db | null = null
  try {
    db = config.databaseUrl ? connectPostgres(config.databaseUrl, 1) : await startEmbedded(config.dataDir)
    const sql = db.sql
    await withTimeout(sql`select 1`, timeoutMs, 'Postgres') // connected first: the timed query below is one round trip
    const t0 = now()
    const [row] = await withTimeout(
      sql<{ version: string; num: string; at: string }[]>`select version() as version, current_setting('server_version_num') as num,
        (extract(epoch from clock_timestamp()) * 1000)::text as at`,
      timeoutMs, 'Postgres')
    const t1 = now()
    const major = Math.floor(Number(row!.num) / 10_000)
    const name = config.databaseUrl ? 'Postgres' : 'embedded store (PGlite)'
    if (config.databaseUrl && major < 14) add('Postgres', 'warn', `reachable, version ${major}: older than the 14 Keyward is tested from`, 'upgrade Postgres (the compose file runs 16)')
    else add('Postgres', 'ok', `${name} reachable, ${row!.version.split(' ').slice(0, 2).join(' ')}`)
    if (!config.databaseUrl) {
      add('store', 'warn', 'embedded: one node, data in one directory', 'for several nodes or a managed database set DATABASE_URL (docs/operations.md, "One process or a cluster")')
    }
    // The clock: Postgres's against this machine's at the midpoint of the round trip.
    const skew = Math.round(Number(row!.at) - (t0 + t1) / 2)
    const abs = Math.abs(skew)
    const skewText = `this machine's clock is ${abs} ms ${skew > 0 ? 'behind' : 'ahead of'} Postgres's (round trip ${Math.round(t1 - t0)} ms)`
    if (abs > SKEW_FAIL_MS) add('clock', 'fail', skewText, 'run NTP (chrony, systemd-timesyncd) on every node and on the database host')
    else if (abs > SKEW_WARN_MS) add('clock', 'warn', skewText, 'run NTP (chrony, systemd-timesyncd) on every node and on the database host')
    else add('clock', 'ok', skewText)

    const [migrations] = await sql<{ n: number }[]>`select count(*)::int as n from information_schema.tables where table_name = 'schema_migrations'`
    const applied = migrations!.n ? new Set((await sql<{ version: string }[]>`select version from schema_migrations`).map((r) => r.version)) : new Set<string>()
    const pending = migrationFiles().filter((f) => !applied.has(f))
    if (pending.length === 0) add('migrations', 'ok', `all ${applied.size} applied`)
    else add('migrations', 'warn', `${pending.length} not applied yet (${pending.slice(0, 3).join(', ')}${pending.length > 3 ? ', …' : ''})`,
      'start a node (it applies them) or run: bun run keyward migrate')

    // Stable: the key opens what was sealed with it (a signing key first, else a webhook's or a connector's secret).
    let sealed: { what: string; value: string } | null = null
    for (const [table, what] of [['signing_keys', 'a signing key'], ['signers', 'a signing key'], ['webhooks', 'a webhook secret'], ['connectors', 'a connector secret']] as const) {
      if (!applied.size) break
      const column = table === 'webhooks' || table === 'connectors' ? 'secret_sealed' : 'private_key_sealed'
      const [r] = await sql.unsafe<{ v: string }[]>(`select ${column} as v from ${table} limit 1`).catch(() => [])
      if (r) {
        sealed = { what, value: r.v }
        break
      }
    }
    if (!sealed) add('SECRET_KEY stable', 'ok', 'nothing sealed yet to check it against')
    else {
      try {
        open(secretKey, sealed.value)
        add('SECRET_KEY stable', 'ok', `opens ${sealed.what} stored in the database`)
      } catch {
        add('SECRET_KEY stable', 'fail', `does not open ${sealed.what} stored in the database: SECRET_KEY changed since it was sealed`,
          'put back the SECRET_KEY the data was written with (every node the same); signing, webhooks and connectors fail without it')
      }
    }

    // Webhooks' endpoints: TLS, and the SSRF guard.
    if (applied.size) {
      const [w] = await sql<{ total: number; plain: number }[]>`select count(*)::int as total, count(*) filter (where url like 'http:%')::int as plain from webhooks where is_active`
      if (w!.plain > 0) add('webhooks', 'warn', `${w!.plain} of ${w!.total} active webhook endpoints are plain http: payloads travel unencrypted`, 'change those endpoints to https:// (PATCH /v1/webhooks/:id)')
      else add('webhooks', 'ok', w!.total ? `${w!.total} active endpoints, all https` : 'none configured')
    }
    if (config.webhookAllowPrivateUrls) add('WEBHOOK_ALLOW_PRIVATE_URLS', 'warn', 'true: webhooks may reach this network\'s private addresses', 'unset it outside a test setup')

    // Connectors: the providers call this installation, over https, at PUBLIC_URL.
    const [c] = applied.size ? await sql<{ n: number; mail: number }[]>`select count(*)::int as n, count(*) filter (where email_keys)::int as mail from connectors` : [{ n: 0, mail: 0 }]
    const publicUrl = env.PUBLIC_URL?.trim() || null
    if (!publicUrl) {
      if (c!.n > 0) add('public URL', 'warn', `${c!.n} payment connectors wait for their provider's calls, and PUBLIC_URL is not set, so this check cannot reach the address they use`,
        'set PUBLIC_URL to the https address the providers call (e.g. https://licenses.example.com)')
      else add('public URL', 'ok', 'PUBLIC_URL not set; no connector needs one yet')
    } else await checkPublicUrl(publicUrl, timeoutMs, add)

    // SMTP: reachable, and needed when a connector e-mails keys.
    if (config.smtpUrl) {
      const transport = nodemailer.createTransport(config.smtpUrl, { connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs } as never)
      try {
        await withTimeout(transport.verify(), timeoutMs + 1_000, 'SMTP')
        add('SMTP', 'ok', `${new URL(config.smtpUrl).host} accepts a connection${new URL(config.smtpUrl).username ? ' and the login' : ''}`)
      } catch (err) {
        add('SMTP', 'fail', `${new URL(config.smtpUrl).host}: ${message(err)}`, 'check SMTP_URL (host, port, smtps:// for TLS on connect, user and password in the URL)')
      } finally {
        transport.close()
      }
    } else if (c!.mail > 0) add('SMTP', 'warn', `${c!.mail} connectors e-mail keys, and SMTP_URL is not set: those mails wait`, 'set SMTP_URL and MAIL_FROM (docs/payments.md)')
    else add('SMTP', 'ok', 'not set; no connector e-mails keys')
  } catch (err) {
    add('Postgres', 'fail', `${config.databaseUrl ? 'not reachable' : 'the embedded store does not open'}: ${message(err)}`,
      config.databaseUrl ? 'check DATABASE_URL (host, port, user, password, database) and that Postgres runs' : `stop the server using ${config.dataDir} first (one process at a time), and check the directory`)
  } finally {
    await db?.close().catch(() => {})
  }

  // ---- NATS and Redis ---------------------------------------------------------------------------------
  if (!config.natsUrl) add('NATS', config.databaseUrl ? 'warn' : 'ok', 'not set: one node only (its caches are not told of other nodes\' changes)',
    config.databaseUrl ? 'with more than one node, set NATS_URL on every node (docs/operations.md, "Running several nodes")' : undefined)
  else {
    try {
      const nc = await withTimeout(natsConnect({ servers: config.natsUrl, timeout: timeoutMs, reconnect: false }), timeoutMs + 1_000, 'NATS')
      add('NATS', 'ok', `reachable, server ${nc.info?.version ?? 'of unknown version'}`)
      await nc.close()
    } catch (err) {
      add('NATS', 'fail', `not reachable: ${message(err)}`, 'check NATS_URL and that nats-server runs')
    }
  }
  if (!config.redisUrl) add('Redis', config.databaseUrl ? 'warn' : 'ok', 'not set: rate limits and quotas are counted per node',
    config.databaseUrl ? 'with more than one node, set REDIS_URL on every node' : undefined)
  else {
    const redis = new Redis(config.redisUrl, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false })
    redis.on('error', () => {})
    try {
      await withTimeout(redis.connect(), timeoutMs + 1_000, 'Redis')
      const info = await redis.info('server')
      add('Redis', 'ok', `reachable, version ${/redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown'}`)
    } catch (err) {
      add('Redis', 'fail', `not reachable: ${message(err)}`, 'check REDIS_URL and that Redis runs')
    } finally {
      redis.disconnect()
    }
  }
  return out
}

/** PUBLIC_URL: https, and this installation answering there with a certificate the system trusts. */
async function checkPublicUrl(publicUrl: string, timeoutMs: number, add: (check: string, status: Status, detail: string, fix?: string) => void) {
  let url: URL
  try {
    url = new URL(publicUrl)
  } catch {
    add('public URL', 'fail', `PUBLIC_URL is not a URL: ${publicUrl.slice(0, 100)}`, 'write it whole, e.g. https://licenses.example.com')
    return
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)
  try {
    const res = await fetch(new URL('/healthz', url), { signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' })
    const body = res.status === 200 ? ((await res.json().catch(() => null)) as { status?: string } | null) : null
    if (body?.status !== 'ok') {
      add('public URL', 'fail', `${url.origin}/healthz answered ${res.status}, not Keyward's health`, 'point PUBLIC_URL (and your proxy) at the nodes')
      return
    }
  } catch (err) {
    add('public URL', 'fail', `${url.origin} not reachable from here: ${message(err)}`,
      url.protocol === 'https:' ? 'check the DNS name, the proxy in front of the nodes and its certificate (a provider refuses an untrusted one)' : 'check the address and the proxy in front of the nodes')
    return
  }
  if (url.protocol !== 'https:') {
    add('public URL', loopback ? 'warn' : 'fail', `${url.origin} answers, over plain http: payment providers call connectors over https only, and tokens would travel in clear`,
      'put a TLS proxy (Caddy, nginx, a load balancer) in front of the nodes and set PUBLIC_URL to its https address')
    return
  }
  add('public URL', 'ok', `${url.origin} answers over https with a trusted certificate`)
}

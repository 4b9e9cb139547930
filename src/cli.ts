// `bun run keyward <command>`: operator tasks without a running server.
import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type Config } from './config'
import type { Sql } from './infra/db'
import { migrate } from './infra/migrate'
import { resolveSecretKey } from './infra/secret-key'
import { PLANS, type Plan } from './core/plans'
import { SCOPES, type Scope } from './core/scopes'
import { createAccount, issueApiKey, listAccounts } from './modules/accounts/service'
import { openDb } from './node'
import { AppError } from './core/errors'
import { LocalBus, type Bus } from './infra/bus'
import { NatsBus } from './infra/nats-bus'
import { createLogger } from './infra/log'
import { OPERATOR } from './modules/events/outbox'
import { MAX_IMPORT_BYTES, MAX_IMPORT_ROWS, type ImportFormat } from './modules/keys/import-parse'
import { importKeys } from './modules/keys/import-service'
import { exportKeys } from './modules/keys/export-service'
import { runRelay } from './modules/relay/cli'

const USAGE = `Usage:
  bun run keyward migrate                                   apply pending SQL migrations
  bun run keyward accounts create --name NAME [--plan PLAN] create an account; prints its id and first token
  bun run keyward accounts list [--q PREFIX] [--page N] [--page-size N]
                                                            accounts, newest first, with usage counts
                                                            (--q: a prefix of the name, any case, or of the id)
  bun run keyward api-keys create --account ID --scope SCOPE [--name NAME]
                                                            issue an API key to an account (recovery);
                                                            prints its token once
  bun run keyward import FILE --account ID [--format json|ndjson|csv] [--dry-run]
                                                            import keys from a file (as POST /v1/keys/import:
                                                            all rows or none; the format from the file's
                                                            extension unless given)
  bun run keyward export --account ID [--format ndjson|csv] [--product ID] [--policy ID]
                         [--status STATUS] [--out FILE]     export the account's keys (stdout unless --out)
  bun run keyward relay request|load|serve --data DIR       the relay mode: floating seats on a customer's network
                                                            (\`bun run keyward relay\` for its commands)
Plans: ${PLANS.join(', ')}
Scopes: ${SCOPES.join(', ')}`

/** A usage error: the message goes to stderr and the process exits 2. */
class UsageError extends Error {}

/** Opens the configured store, applies pending migrations, runs `work`, closes the store. */
async function withDb<T>(config: Config, work: (sql: Sql) => Promise<T>): Promise<T> {
  const db = await openDb(config)
  try {
    await migrate(db.sql)
    return await work(db.sql)
  } finally {
    await db.close()
  }
}

function integer(flag: string, text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined
  const n = Number(text)
  if (!/^\d+$/.test(text) || n < min || n > max) throw new UsageError(`${flag} must be an integer ${min}..${max}`)
  return n
}

async function accountsCreate(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { name: { type: 'string' }, plan: { type: 'string' } } })
  if (!values.name || values.name.length > 200) throw new UsageError('--name is required (1..200 characters)')
  if (values.plan && !PLANS.includes(values.plan as Plan)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`)
  const { account, api_key } = await withDb(config, (sql) =>
    createAccount(sql, { name: values.name!, plan: values.plan as Plan | undefined }, resolveSecretKey(config)),
  )
  console.log(`account_id: ${account.id}`)
  console.log(`plan: ${account.plan}`)
  console.log(`token: ${api_key.token}   (full_access; shown only this once)`)
}

async function accountsList(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { q: { type: 'string' }, page: { type: 'string' }, 'page-size': { type: 'string' } },
  })
  if (values.q !== undefined && values.q.length > 200) throw new UsageError('--q must be at most 200 characters')
  const query = {
    q: values.q,
    page: integer('--page', values.page, 0, 1_000_000),
    page_size: integer('--page-size', values['page-size'], 1, 100),
  }
  const page = await withDb(config, (sql) => listAccounts(sql, query))
  // Tab-separated, one account a line: easy to read and to cut/awk. The name goes last (it may hold spaces).
  console.log(['id', 'plan', 'created_at', 'products', 'keys', 'active_keys', 'activations', 'api_keys', 'name'].join('\t'))
  for (const a of page.data) {
    const u = a.usage
    console.log([a.id, a.plan, a.created_at, u.products, u.keys, u.active_keys, u.activations, u.api_keys, a.name].join('\t'))
  }
  const first = page.page * page.page_size
  const shown = page.data.length ? `${first + 1}-${first + page.data.length}` : 'none'
  console.log(`# ${shown} of ${page.total}${page.has_more ? ` (more: --page ${page.page + 1})` : ''}`)
}

async function apiKeysCreate(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, scope: { type: 'string' }, name: { type: 'string' } },
  })
  if (!values.account) throw new UsageError('--account is required (an acct_ id)')
  if (!values.scope || !SCOPES.includes(values.scope as Scope)) throw new UsageError(`--scope must be one of ${SCOPES.join(', ')}`)
  const name = values.name ?? 'Recovery'
  if (name.length < 1 || name.length > 200) throw new UsageError('--name must be 1..200 characters')
  const apiKey = await withDb(config, (sql) => issueApiKey(sql, values.account!, { name, scope: values.scope as Scope }))
  console.log(`api_key_id: ${apiKey.id}`)
  console.log(`account_id: ${values.account}`)
  console.log(`scope: ${apiKey.scope}`)
  console.log(`token: ${apiKey.token}   (shown only this once)`)
}

/** The bus of a cluster (NATS), so running nodes forget values they had answered not_found for; none embedded. */
async function withBus<T>(config: Config, sql: Sql, work: (bus: Bus) => Promise<T>): Promise<T> {
  const bus: Bus = config.natsUrl ? await NatsBus.start({ url: config.natsUrl, sql, log: createLogger('error', 2), trustWindowMs: config.degradedTtlMs }) : new LocalBus()
  try {
    return await work(bus)
  } finally {
    await bus.close()
  }
}

const FORMATS: Record<string, ImportFormat> = { json: 'json', ndjson: 'ndjson', jsonl: 'ndjson', csv: 'csv' }

async function importCommand(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { account: { type: 'string' }, format: { type: 'string' }, 'dry-run': { type: 'boolean' } },
  })
  const file = positionals[0]
  if (!file || positionals.length > 1) throw new UsageError('import takes one FILE')
  if (!values.account) throw new UsageError('--account is required (an acct_ id)')
  const format = FORMATS[values.format ?? file.split('.').pop()!.toLowerCase()]
  if (!format) throw new UsageError('--format must be json, ndjson or csv (or name the file .json, .ndjson, .jsonl or .csv)')
  const source = Bun.file(file)
  if (!(await source.exists())) throw new UsageError(`${file}: no such file`)
  if (source.size > MAX_IMPORT_BYTES) throw new UsageError(`${file} is over ${MAX_IMPORT_BYTES} bytes: split it (at most ${MAX_IMPORT_ROWS} rows a file)`)
  const text = await source.text()
  let body: unknown = text
  if (format === 'json') {
    try {
      body = JSON.parse(text)
    } catch {
      throw new UsageError(`${file} is not valid JSON`)
    }
  }
  const accountId = values.account
  try {
    const answer = await withDb(config, async (sql) => {
      const [account] = await sql`select 1 from accounts where id = ${accountId}`
      if (!account) throw new UsageError(`no account ${accountId}`)
      return withBus(config, sql, (bus) => importKeys({ sql, bus }, { accountId, actor: OPERATOR }, { format, body, dryRun: values['dry-run'] === true }))
    })
    if ('dry_run' in answer) console.log(`dry run: ${answer.would_create} would be created, ${answer.would_skip} skipped (external_id exists)`)
    else console.log(`created: ${answer.created}\nskipped: ${answer.skipped} (external_id exists)`)
  } catch (err) {
    if (!(err instanceof AppError)) throw err
    // the same answer as the API's problem, for a terminal: every bad row by line
    const lines = (err.extra.rows ?? []).flatMap((r) =>
      r.errors.map((e) => `  line ${r.line}${r.external_id ? ` (${r.external_id})` : ''}: ${e.field} ${e.message}`),
    )
    const fields = (err.extra.errors ?? []).map((e) => `  ${e.field} ${e.message}`)
    throw new UsageError([`${err.detail}`, ...lines, ...(lines.length ? [] : fields)].join('\n'))
  }
}

async function exportCommand(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      format: { type: 'string' },
      product: { type: 'string' },
      policy: { type: 'string' },
      status: { type: 'string' },
      out: { type: 'string' },
    },
  })
  if (!values.account) throw new UsageError('--account is required (an acct_ id)')
  const format = values.format ?? 'ndjson'
  if (format !== 'ndjson' && format !== 'csv') throw new UsageError('--format must be ndjson or csv')
  const statuses = ['active', 'revoked', 'suspended', 'expired'] as const
  if (values.status !== undefined && !statuses.includes(values.status as never)) throw new UsageError(`--status must be one of ${statuses.join(', ')}`)
  const query = { format, product_id: values.product, policy_id: values.policy, status: values.status as (typeof statuses)[number] | undefined } as const
  const count = await withDb(config, async (sql) => {
    const [account] = await sql`select 1 from accounts where id = ${values.account!}`
    if (!account) throw new UsageError(`no account ${values.account}`)
    const out = values.out ? Bun.file(values.out).writer() : Bun.stdout.writer()
    let lines = 0
    for await (const chunk of exportKeys({ sql }, { accountId: values.account! }, query) as unknown as AsyncIterable<Uint8Array>) {
      for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) lines++
      out.write(chunk)
      await out.flush()
    }
    await out.end()
    return format === 'csv' ? Math.max(0, lines - 1) : lines
  })
  if (values.out) console.log(`exported ${count} keys to ${values.out}`)
}

const COMMANDS: Record<string, (config: Config, args: string[]) => Promise<void>> = {
  'accounts create': accountsCreate,
  'accounts list': accountsList,
  'api-keys create': apiKeysCreate,
}
/** Commands of one word, taking the rest as arguments. */
const SINGLE: Record<string, (config: Config, args: string[]) => Promise<void>> = { import: importCommand, export: exportCommand }

async function main(argv: string[]): Promise<number> {
  // The relay mode needs none of the node's settings (no Postgres, NATS or Redis): its own config.
  if (argv[0] === 'relay') return runRelay(argv.slice(1))
  const config = loadConfig()
  const [command, sub] = argv
  try {
    if (command === 'migrate') {
      const db = await openDb(config)
      try {
        const applied = await migrate(db.sql)
        console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Nothing to apply')
      } finally {
        await db.close()
      }
      return 0
    }
    const single = command === undefined ? undefined : SINGLE[command]
    if (single) {
      await single(config, argv.slice(1))
      return 0
    }
    const run = COMMANDS[`${command} ${sub}`]
    if (run) {
      await run(config, argv.slice(2))
      return 0
    }
  } catch (err) {
    // parseArgs throws TypeError (ERR_PARSE_ARGS_*) for unknown options or a missing value.
    const parse = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    if (!(err instanceof UsageError) && !parse) throw err
    console.error((err as Error).message)
    return 2
  }
  console.error(USAGE)
  return command ? 2 : 0
}

try {
  process.exit(await main(process.argv.slice(2)))
} catch (err) {
  console.error(err instanceof ConfigError ? err.message : `Error: ${(err as Error).message}`)
  process.exit(1)
}

// `bun run keyward <command>`: operator tasks without a running server.
import { parseArgs } from 'node:util'
import { ConfigError, loadConfig } from './config'
import { migrate } from './infra/migrate'
import { resolveSecretKey } from './infra/secret-key'
import { PLANS, type Plan } from './core/plans'
import { createAccount } from './modules/accounts/service'
import { openDb } from './node'

const USAGE = `Usage:
  bun run keyward migrate                                   apply pending SQL migrations
  bun run keyward accounts create --name NAME [--plan PLAN] create an account; prints its id and first token
Plans: ${PLANS.join(', ')}`

async function main(argv: string[]): Promise<number> {
  const config = loadConfig()
  const [command, sub] = argv
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
  if (command === 'accounts' && sub === 'create') {
    const { values } = parseArgs({ args: argv.slice(2), options: { name: { type: 'string' }, plan: { type: 'string' } } })
    if (!values.name || values.name.length > 200) {
      console.error('--name is required (1..200 characters)')
      return 2
    }
    if (values.plan && !PLANS.includes(values.plan as Plan)) {
      console.error(`--plan must be one of ${PLANS.join(', ')}`)
      return 2
    }
    const db = await openDb(config)
    try {
      await migrate(db.sql)
      const { account, api_key } = await createAccount(
        db.sql,
        { name: values.name, plan: values.plan as Plan | undefined },
        resolveSecretKey(config),
      )
      console.log(`account_id: ${account.id}`)
      console.log(`plan: ${account.plan}`)
      console.log(`token: ${api_key.token}   (full_access; shown only this once)`)
    } finally {
      await db.close()
    }
    return 0
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

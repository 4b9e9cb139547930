// `bun run start`: one node on the configured (or embedded) stores.
import { ConfigError, loadConfig } from './config'
import { startNode } from './node'

let config
try {
  config = loadConfig()
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message)
    process.exit(1)
  }
  throw err
}

const node = await startNode(config)
const mode = config.embedded ? `embedded (data in ${config.dataDir})` : 'external Postgres'
console.log(`Keyward listening on ${node.url}  [${mode}]`)
console.log(`API docs: ${node.url}/docs   OpenAPI: ${node.url}/docs/json`)
if (node.demoToken) {
  console.log(`Demo account created (plan growth). Its full_access token, shown only this once:\n  ${node.demoToken}`)
  console.log(`Try: curl -H "Authorization: Bearer ${node.demoToken}" ${node.url}/v1/ping`)
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, async () => {
    await node.stop()
    process.exit(0)
  })
}

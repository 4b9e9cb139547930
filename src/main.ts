// `bun run start`: one node on the configured (or embedded) stores; with WORKERS=N > 1, a supervisor
// of N worker processes on one port (see supervisor.ts), each of which runs this file as a node.
import { ConfigError, loadConfig } from './config'
import { startNode, StartupError } from './node'
import { supervise, workerArgs } from './supervisor'

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

const worker = workerArgs()
if (config.workers > 1 && !worker.isWorker) await supervise(config)

let node
try {
  node = await startNode(config, { port: worker.port })
} catch (err) {
  if (err instanceof StartupError) {
    console.error(err.message)
    process.exit(1)
  }
  throw err
}
const mode = config.embedded ? `embedded (data in ${config.dataDir})` : 'external Postgres'
console.log(`Keyward listening on ${node.url}  (${node.listening})  [${mode}]`)
console.log(`API docs: ${node.url}/docs   OpenAPI: ${node.url}/docs/json`)
console.log(`Console: ${node.url}/console   (sign in with an API token, or the ADMIN_TOKEN for operator mode)`)
if (node.demoToken) {
  console.log(`Demo account created (plan growth). Its full_access token, shown only this once:\n  ${node.demoToken}`)
  console.log(`Try: curl -H "Authorization: Bearer ${node.demoToken}" ${node.url}/v1/ping`)
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, async () => {
    // Graceful: stop accepting, finish in-flight requests, flush batches, drain NATS, close pools.
    // Bounded, so an orchestrator's SIGKILL never has to be the thing that ends us.
    setTimeout(() => {
      console.error(`Keyward shutdown exceeded ${config.shutdownTimeoutMs} ms; exiting`)
      process.exit(1)
    }, config.shutdownTimeoutMs).unref()
    await node.stop()
    process.exit(0)
  })
}

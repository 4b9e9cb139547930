// The `keyward-relay` executable's entry (`bun run build:relay`): the relay mode of Keyward alone,
// `keyward-relay <request|load|serve> --data DIR` (docs/integrating.md, "Floating seats on your customer's network").
import { runRelay } from './modules/relay/cli'

try {
  process.exit(await runRelay(process.argv.slice(2)))
} catch (err) {
  console.error(`Error: ${(err as Error).message}`)
  process.exit(1)
}

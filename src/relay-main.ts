// The `keyward-relay` executable's entry (`bun run build:relay`): the relay mode of Keyward alone,
// `keyward-relay <request|load|serve> --data DIR` (docs/integrating.md, "Floating seats on your customer's network").
import { runRelay } from './modules/relay/cli'

// `keyward-relay serve …`, or `keyward-relay relay serve …` as `keyward relay serve …` is spelled.
const args = process.argv.slice(2)
try {
  process.exit(await runRelay(args[0] === 'relay' ? args.slice(1) : args))
} catch (err) {
  console.error(`Error: ${(err as Error).message}`)
  process.exit(1)
}

// Preloaded (bunfig.toml): after every test file of the run, each status the shared test client saw on
// a documented operation must be listed in the OpenAPI document that run served. Order-independent:
// it sees the whole run, whichever files ran.
import { afterAll } from 'bun:test'
import { undocumented, type Call } from './status-coverage'

afterAll(() => {
  const seen = (globalThis as { keywardObserved?: { calls: Call[]; document: unknown } }).keywardObserved
  if (!seen?.document) return // no test of this run fetched /docs/json: nothing to compare against
  const missing = undocumented(seen.document as object, seen.calls)
  if (missing.length > 0) {
    throw new Error(`Statuses the tests observed that /docs/json does not document:\n  ${missing.join('\n  ')}`)
  }
})

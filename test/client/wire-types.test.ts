// The SDK's wire types (client/src/wire.ts) are generated from the document a node serves at /docs/json
// (scripts/gen-client-types.ts): this fails while the checked-in file is stale. Fix: `bun run gen:client-types`.
import { expect, setDefaultTimeout, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { WIRE_FILE, wireTypes } from '../../scripts/gen-client-types'
import { REFUSAL_REASONS } from '../../src/core/values'
import { useHarness } from '../support/harness'

setDefaultTimeout(60_000)
const h = useHarness({ socket: false })

test('client/src/wire.ts is what `bun run gen:client-types` writes for the served /docs/json', async () => {
  const res = await h.call('GET', '/docs/json')
  expect(res.status).toBe(200)
  const expected = await wireTypes(res.body)
  const current = readFileSync(WIRE_FILE, 'utf8')
  if (current !== expected) throw new Error('client/src/wire.ts is stale: run `bun run gen:client-types` and commit it')
  expect(current).toBe(expected)
})

test('the refusal reasons the SDK is typed with are the server\'s list (core/values.ts)', async () => {
  const doc = (await h.call('GET', '/docs/json')).body
  const answers = doc.paths['/v1/validate'].post.responses['200'].content['application/json'].schema.anyOf as any[]
  const refusal = answers.find((a) => a.properties?.valid?.const === false)
  const reasons = refusal.properties.reason.anyOf?.map((r: any) => r.const) ?? refusal.properties.reason.enum
  expect(reasons).toEqual([...REFUSAL_REASONS])
  expect(readFileSync(WIRE_FILE, 'utf8')).toContain(`reason: ${REFUSAL_REASONS.map((r) => `"${r}"`).join(' | ')};`)
})

// A node started without SMTP_URL (or MAIL_FROM) in a cluster whose other nodes have them stays ready
// (it issues keys as before) but /readyz says so in `warnings`: the buyers whose purchase it handles
// get no email while the other nodes' buyers do. Nodes publish whether they can mail in their
// membership row (sql/033_cluster_nodes_mail.sql). Needs Postgres and NATS (a cluster).
import { afterAll, expect, setDefaultTimeout, test } from 'bun:test'
import { startNode, type Node } from '../../src/node'
import { appClient, realPostgres, testConfig, useHarness } from '../support/harness'
import { waitUntil } from '../support/wait'

setDefaultTimeout(60_000)

const cluster = realPostgres && !!process.env.NATS_URL
const MAIL = { SMTP_URL: 'smtp://127.0.0.1:1', MAIL_FROM: 'licenses@acme.example' }
const h = useHarness({ socket: false })
const others: Node[] = []
afterAll(async () => {
  for (const n of others) await n.stop()
})

test.skipIf(!cluster)('a node without mail warns once another live node has it; a node with mail does not', async () => {
  // alone, and with a second node that cannot mail either: nothing to warn about
  const plain = await startNode(testConfig({}, h.db.url))
  others.push(plain)
  const ready = await h.call('GET', '/readyz')
  expect(ready.status).toBe(200)
  expect(ready.body.warnings).toBeUndefined()

  const mailing = await startNode(testConfig(MAIL, h.db.url))
  others.push(mailing)
  let answer = await h.call('GET', '/readyz')
  await waitUntil(async () => (answer = await h.call('GET', '/readyz')).body.warnings !== undefined, 10_000)
  expect(answer.status).toBe(200)
  expect(answer.body.warnings).toEqual([expect.stringContaining('SMTP_URL')])
  expect((await appClient(plain)('GET', '/readyz')).body.warnings).toEqual([expect.stringContaining('SMTP_URL')])
  const fromMailing = await appClient(mailing)('GET', '/readyz')
  expect(fromMailing.status).toBe(200)
  expect(fromMailing.body.warnings).toBeUndefined()

  // the mailing node leaves: the warning goes with it
  await mailing.stop()
  others.pop()
  await waitUntil(async () => (await h.call('GET', '/readyz')).body.warnings === undefined, 10_000)
})

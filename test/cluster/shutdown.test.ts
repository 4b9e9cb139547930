// SIGTERM under load on a real node process: every request sent before the signal gets its answer,
// the process exits 0, and the last-seen updates it had batched in memory are in Postgres afterwards.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { newKey, newProduct } from '../support/harness'
import { fingerprint, startCluster, startNodeProcess, type Cluster } from '../support/cluster'
import { requireCluster } from '../support/environment'

const ready = await requireCluster('cluster/shutdown')

describe.if(ready)('graceful shutdown', () => {
  let c: Cluster
  beforeAll(async () => {
    // A long flush interval: the last-seen updates can only reach Postgres through the shutdown flush.
    c = await startCluster(2, { env: { FLUSH_INTERVAL_MS: '60000' } })
  }, 60_000)
  afterAll(() => c?.close())

  test('SIGTERM under load: no failed request in flight, batched writes flushed, exit 0', async () => {
    const { token } = await c.account('growth')
    const product = await newProduct(c.call, token)
    const [victim] = c.nodes
    const devices: { key: string; device: string }[] = []
    for (let i = 0; i < 16; i++) {
      const key = await newKey(c.call, token, product.id)
      const device = fingerprint(i)
      expect((await victim!.call('POST', '/v1/validate', { token, body: { key: key.key_value, device_fingerprint: device } })).body.valid).toBe(true)
      devices.push({ key: key.key_value, device })
    }
    await Bun.sleep(300) // the activations' own last_validated_at are older than what follows

    const lastOk = new Map<string, number>() // device → when its last successful validate was sent
    const failures: string[] = []
    let okCount = 0
    let refused = 0
    let signalledAt = Number.POSITIVE_INFINITY
    const loops = devices.map(async ({ key, device }) => {
      for (;;) {
        const sent = Date.now()
        try {
          const res = await victim!.call('POST', '/v1/validate', { token, body: { key, device_fingerprint: device, app_version: `v${sent}` } })
          if (res.status !== 200 || res.body.valid !== true) failures.push(`${res.status} ${JSON.stringify(res.body).slice(0, 120)}`)
          else {
            okCount++
            lastOk.set(device, sent)
          }
        } catch (err) {
          // A request sent before the signal was in flight when it came: it must get its answer. One
          // sent after it may find the node gone (refused, or reset while the listener closes): the
          // client (or balancer) goes elsewhere. Every answer that did come must be a 200.
          if (sent >= signalledAt) refused++
          else failures.push(`${String(err).slice(0, 120)} (sent ${signalledAt - sent} ms before the signal)`)
          return
        }
      }
    })
    await Bun.sleep(1500)
    signalledAt = Date.now()
    const code = await victim!.stop('SIGTERM')
    await Promise.all(loops)
    console.log(`SIGTERM under load: ${okCount} answered, ${failures.length} failed, ${refused} sent after the signal found the node gone; exit ${code}`)
    if (failures.length) console.log(failures.join('\n'))
    expect(code).toBe(0)
    expect(failures).toEqual([])

    const sql = postgres(c.db.url!, { max: 1, onnotice: () => {} })
    try {
      const rows = await sql<{ device_fingerprint: string; last_validated_at: Date; app_version: string | null }[]>`
        select device_fingerprint, last_validated_at, app_version from activations where status = 'active'`
      const byDevice = new Map(rows.map((r) => [r.device_fingerprint, r]))
      for (const { device } of devices) {
        const row = byDevice.get(device)!
        const sent = lastOk.get(device)!
        // the node stamped the validate when it handled it, never before the client sent it
        expect(row.last_validated_at.getTime()).toBeGreaterThanOrEqual(sent)
        expect(Number(row.app_version!.slice(1))).toBeGreaterThanOrEqual(sent)
      }
    } finally {
      await sql.end()
    }
  }, 60_000)

  test('WORKERS=2: one command starts two worker processes on one port; SIGTERM stops them all', async () => {
    const node = await startNodeProcess(c.db.url!, { env: { WORKERS: '2' } })
    const childrenOf = (pid: number) => {
      const out = Bun.spawnSync(['ps', '-o', 'pid=', '--ppid', String(pid)]).stdout.toString()
      return out.split(/\s+/).filter(Boolean).map(Number)
    }
    try {
      // both workers come up (the URL line is printed by whichever is first)
      const deadline = Date.now() + 20_000
      while ((node.output().match(/Keyward listening on/g) ?? []).length < 2 && Date.now() < deadline) await Bun.sleep(50)
      const workers = childrenOf(node.proc.pid)
      expect(workers.length).toBe(2)
      for (let i = 0; i < 20; i++) {
        const res = await fetch(`${node.url}/healthz`, { headers: { connection: 'close' } })
        expect(res.status).toBe(200)
      }
      expect(await node.stop('SIGTERM')).toBe(0)
      for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow()
    } finally {
      await node.stop('SIGKILL')
    }
  }, 60_000)
})

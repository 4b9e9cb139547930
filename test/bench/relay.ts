// The Keyward Relay in the validate benchmark (`bun run bench`): a relay process on its own data folder,
// licensed (per the contract, by a test account: test/support/relay.ts) for the bench key's value, its
// bench device already holding a lease; and the memory the relay holds per lease.
//   bun test/bench/relay.ts memory [LEASES]   the lease pool's heap per lease (run by the bench)
import { spawn } from 'bun'
import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { issueRelayLicense, relayCli, testAccount, writeTemp } from '../support/relay'
import { freePort, waitFor } from './servers'

const ROOT = join(import.meta.dir, '..', '..')

/** Starts a relay for `keyValue` whose `fingerprint` holds a lease; the caller kills the process. */
export async function startBenchRelay(dataDir: string, keyValue: string, body: string) {
  const data = mkdtempSync(join(dataDir, 'relay-'))
  const env = { KEYWARD_MACHINE_ID: 'bench-relay' }
  const code = (await relayCli(['request', '--data', data], env)).stdout.trim()
  const account = testAccount()
  const license = issueRelayLicense(account, code, { seats: 100, leaseSeconds: 3600 })
  const loaded = await relayCli(['load', writeTemp(data, 'relay.lic', license.file), '--data', data, '--key', keyValue, '--root', account.root.publicKeyB64], env)
  if (loaded.code !== 0) throw new Error(`relay load failed: ${loaded.stderr}`)
  const port = await freePort()
  const proc = spawn(['bun', join(ROOT, 'src/cli.ts'), 'relay', 'serve', '--data', data, '--port', String(port), '--host', '127.0.0.1'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/healthz`)
  const first = await (await fetch(`${url}/v1/validate`, { method: 'POST', body })).json()
  if (!(first as { valid?: boolean }).valid) throw new Error(`the relay refused the bench key: ${JSON.stringify(first)}`)
  return { url, proc, pid: proc.pid }
}

/** Heap bytes per lease of a pool holding `n` leases (in this process, store on a temp folder). */
async function leaseMemory(n: number) {
  const { RelayStore } = await import('../../src/modules/relay/store')
  const { LeasePool } = await import('../../src/modules/relay/pool')
  const { createHash } = await import('node:crypto')
  const dir = mkdtempSync(join(require('node:os').tmpdir(), 'relay-mem-'))
  const store = RelayStore.open(dir)
  const account = testAccount()
  const code = (await relayCli(['request', '--data', dir])).stdout.trim()
  const license = issueRelayLicense(account, code, { seats: n, leaseSeconds: 3600 })
  await relayCli(['load', writeTemp(dir, 'l.lic', license.file), '--data', dir, '--key', 'RE1AY-TESTK-EYVA1-0E000-00001', '--root', account.root.publicKeyB64])
  const pool = new LeasePool(store)
  const fps = Array.from({ length: n }, (_, i) => createHash('sha256').update(`m${i}`).digest('hex'))
  Bun.gc(true)
  const before = process.memoryUsage().heapUsed
  store.db.exec('begin')
  for (const [i, fp] of fps.entries()) pool.validate({ key: 'RE1AY-TESTK-EYVA1-0E000-00001', device_fingerprint: fp, device_name: `Workstation ${i}`, app_version: '1.0.0' })
  store.db.exec('commit')
  Bun.gc(true)
  const after = process.memoryUsage().heapUsed
  console.log(`relay: ${n.toLocaleString('en')} leases held: ${((after - before) / n).toFixed(0)} bytes of heap per lease (device name and app version included), ${(pool.held() === n ? 'all held' : `only ${pool.held()} held!`)}`)
}

if (import.meta.main && process.argv[2] === 'memory') await leaseMemory(Number(process.argv[3] ?? 10_000))

// Helpers shared by the validation tests.
import type { Sql } from '../../src/infra/db'
import type { Client, Harness } from '../support/harness'
import { newKey, newProduct } from '../support/harness'
import type { KeyRow } from '../../src/modules/validation/hot-state'

export { fingerprint } from '../support/harness'

export function validate(call: Client, token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return call('POST', '/v1/validate', { token, body, headers })
}

/** A fresh account (plan) with one product and one key (extra key fields). */
export async function setup(h: Harness, key: Record<string, unknown> = {}, plan = 'growth') {
  const { id: accountId, token } = await h.account(plan)
  const product = await newProduct(h.call, token)
  const created = await newKey(h.call, token, product.id, key)
  return { accountId, token, product, key: created as { id: string; key_value: string; product_id: string } }
}

/** Outbox events of `type` about one key (activation events carry key_id, key events are the key). */
export async function events(sql: Sql, type: string, keyId: string): Promise<{ id: string; data: any }[]> {
  return sql<{ id: string; data: any }[]>`select id, data from events where type = ${type}
    and (data->>'key_id' = ${keyId} or data->>'id' = ${keyId}) order by seq`
}

export async function activationRows(sql: Sql, keyId: string) {
  return sql<{ id: string; device_fingerprint: string; status: string }[]>`select id, device_fingerprint, status
    from activations where key_id = ${keyId} order by activated_at, id`
}

export async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await what()
    if (ok(v) || Date.now() > deadline) return v
    await Bun.sleep(50)
  }
}

export interface DbProxy {
  port: number
  /** Stops listening and drops every connection: new connections are refused (a dead port). */
  down(): Promise<void>
  up(): Promise<void>
  close(): Promise<void>
}

/**
 * A TCP forwarder to a database that can play dead. Unlike a proxy that accepts and then drops
 * connections (postgres.js keeps retrying those and its queries wait), a refused port makes every
 * query fail at once, which is what an unreachable database looks like.
 */
export async function startDbProxy(targetHost: string, targetPort: number): Promise<DbProxy> {
  const net = await import('node:net')
  const sockets = new Set<import('node:net').Socket>()
  let server: import('node:net').Server | null = null
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = net.createServer((client) => {
        const upstream = net.connect(targetPort, targetHost)
        const kill = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
        }
        for (const sock of [client, upstream]) {
          sockets.add(sock)
          sock.on('error', kill)
          sock.on('close', kill)
        }
        client.pipe(upstream)
        upstream.pipe(client)
      })
      s.once('error', reject)
      s.listen(port, '127.0.0.1', () => {
        server = s
        resolve((s.address() as import('node:net').AddressInfo).port)
      })
    })
  const port = await listen(0)
  const down = async () => {
    const s = server
    server = null
    for (const sock of [...sockets]) sock.destroy()
    sockets.clear()
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()))
  }
  return {
    port,
    down,
    async up() {
      if (!server) await listen(port)
    },
    close: down,
  }
}

/** A hot-state row for the cache's own rules (an active key of acct_1 / prod_1 with 3 slots), with overrides. */
export const keyRow = (over: Partial<KeyRow> = {}): KeyRow => ({
  accountId: 'acct_1',
  productId: 'prod_1',
  status: 'active',
  plan: null,
  expiresAt: null,
  limit: 3,
  devices: [],
  ...over,
})

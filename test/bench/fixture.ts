// What the validate benchmarks measure against: an account on a running node (enterprise: unlimited
// quota, so runs measure counting, not 429s), one key, one device already activated.
import { randomBytes } from 'node:crypto'
import { ADMIN_TOKEN as NODE_ADMIN_TOKEN, type Client } from '../support/harness'

export const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'

export interface BenchKey {
  /** the account's full_access token */
  token: string
  /** the validate request body for the known key and device */
  body: string
  keyValue: string
  fingerprint: string
  /** the node's valid answer for that key and device, as JSON */
  answer: string
}

export async function prepareBenchKey(url: string): Promise<BenchKey> {
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return res.json() as Promise<any>
  }
  const acct = await call('POST', '/admin/accounts', ADMIN_TOKEN, { name: 'Bench', plan: 'enterprise' })
  const token: string = acct.api_key.token
  const product = await call('POST', '/v1/products', token, { name: 'Bench', slug: 'bench' })
  const key = await call('POST', '/v1/keys', token, { product_id: product.id, activation_limit: 3 })
  if (process.env.BENCH_SIGNING_KEY) {
    // signed answers by a signing key (with its certificate) rather than the root; a node without
    // signing keys (an older checkout) answers 404 and keeps signing with its one key
    const created = await call('POST', '/v1/signing-keys', token, {})
    if (created.kid) await call('POST', `/v1/signing-keys/${created.kid}/activate`, token, {})
  }
  const fingerprint = randomBytes(32).toString('hex')
  const body = JSON.stringify({ key: key.key_value, device_fingerprint: fingerprint, app_version: '1.0.0' })
  const first = await call('POST', '/v1/validate', token, JSON.parse(body))
  if (first.valid !== true) throw new Error(`bench key does not validate: ${JSON.stringify(first)}`)
  return { token, body, keyValue: key.key_value as string, fingerprint, answer: JSON.stringify(first) }
}

type Service = 'DATABASE_URL' | 'NATS_URL' | 'REDIS_URL'
const LOCAL: Record<Service, string> = {
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres',
  NATS_URL: 'nats://127.0.0.1:4222',
  REDIS_URL: 'redis://127.0.0.1:6379',
}

/** A benchmark that needs the local services: without them it says how to run it and exits 1. */
export function requireServices(command: string, needs: Service[]) {
  if (needs.every((v) => process.env[v])) return
  console.error(`${command} needs ${needs.join(', ')} (the local services), e.g.\n  ${needs.map((v) => `${v}=${LOCAL[v]}`).join(' ')} ${command}`)
  process.exit(1)
}

/**
 * A new enterprise account (unlimited quota: a run measures the work, not 429s) on a node started by
 * test/support/cluster.ts (whose operator token is the tests' own): its id and full_access token.
 */
export async function benchAccount(admin: Client, name = 'Bench'): Promise<{ id: string; token: string }> {
  const acct = await admin('POST', '/admin/accounts', { token: NODE_ADMIN_TOKEN, body: { name, plan: 'enterprise' } })
  if (acct.status !== 201) throw new Error(`bench account: ${acct.status} ${JSON.stringify(acct.body)}`)
  return { id: acct.body.account.id, token: acct.body.api_key.token }
}

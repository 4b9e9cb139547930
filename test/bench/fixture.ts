// What the validate benchmarks measure against: an account on a running node (enterprise: unlimited
// quota, so runs measure counting, not 429s), one key, one device already activated.
import { randomBytes } from 'node:crypto'

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
  const fingerprint = randomBytes(32).toString('hex')
  const body = JSON.stringify({ key: key.key_value, device_fingerprint: fingerprint, app_version: '1.0.0' })
  const first = await call('POST', '/v1/validate', token, JSON.parse(body))
  if (first.valid !== true) throw new Error(`bench key does not validate: ${JSON.stringify(first)}`)
  return { token, body, keyValue: key.key_value as string, fingerprint, answer: JSON.stringify(first) }
}

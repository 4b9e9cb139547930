// The end-user page's door (GET /portal/:product_id/offline and its two routes, docs/api.md, "The
// end-user page"). Public: no sign-in, the key inside the code is the credential. So before any
// Postgres work each call passes two limits held in this node's memory (one node's view, as the
// holder routes' gate: docs/decisions.md, "Air-gapped requests"): 60 a minute per client address, and
// 20 an hour per key (a request's key value, a deactivation's activation). Every kind of "no" about the
// product (unknown, portal off) is the same 404 as an unknown key, so nothing can be enumerated.
import { AppError } from '../../core/errors'
import type { Plan } from '../../core/plans'
import type { Sql } from '../../infra/db'
import { portableKeyHash, sha256Hex } from '../../infra/crypto'
import { TokenBuckets } from '../../infra/token-buckets'
import { MAX_DEACTIVATION, MAX_REQUEST, parseDeactivation, parseRequest } from './codes'
import { portalNotFound, type Door } from './service'

export const PER_ADDRESS_PER_MINUTE = 60
export const PER_KEY_PER_HOUR = 20
const PRODUCT_ID = /^prod_[0-9A-HJKMNP-TV-Z]{26}$/

function limited(waitMs: number, what: string): AppError {
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
  return new AppError('rate_limited', `Too many calls from ${what}; try again in ${retryAfter} s`, { retryAfter })
}

export class PortalGate {
  private byAddress = new TokenBuckets(PER_ADDRESS_PER_MINUTE / 60, PER_ADDRESS_PER_MINUTE)
  private byKey = new TokenBuckets(PER_KEY_PER_HOUR / 3600, PER_KEY_PER_HOUR)

  /** One call from a client address (null when the socket tells none: those share one bucket). */
  admitAddress(address: string | null, now = Date.now()): void {
    const wait = this.byAddress.take(address ?? '-', now)
    if (wait > 0) throw limited(wait, 'this address')
  }

  /** An activation: counted against its key value (hashed: no value is held in memory). Malformed codes are the service's 400. */
  admitKey(request: string, now = Date.now()): void {
    if (request.length > MAX_REQUEST) return
    const parsed = parseRequest(request)
    if (!parsed.ok) return
    const name = portableKeyHash(parsed.value.key) ?? sha256Hex(parsed.value.key.trim())
    const wait = this.byKey.take(`k:${name}`, now)
    if (wait > 0) throw limited(wait, 'this key')
  }

  /** A deactivation: counted against the activation it names. */
  admitDeactivation(code: string, now = Date.now()): void {
    if (code.length > MAX_DEACTIVATION) return
    const d = parseDeactivation(code)
    if (d === null) return
    const wait = this.byKey.take(`a:${d.activation_id}`, now)
    if (wait > 0) throw limited(wait, 'this activation')
  }
}

/** The account behind a product whose page is on; 404 for every other product id. */
export async function portalDoor(sql: Sql, productId: string): Promise<Door> {
  if (!PRODUCT_ID.test(productId)) throw portalNotFound()
  const [row] = await sql<{ account_id: string; plan: Plan }[]>`select p.account_id, a.plan from products p join accounts a on a.id = p.account_id
    where p.id = ${productId} and p.offline_portal`
  if (!row) throw portalNotFound()
  return { accountId: row.account_id, plan: row.plan, productId }
}

/** The page's product: its name when its page is on, else null. */
export async function portalProduct(sql: Sql, productId: string): Promise<{ name: string } | null> {
  if (!PRODUCT_ID.test(productId)) return null
  const [row] = await sql<{ name: string }[]>`select name from products where id = ${productId} and offline_portal`
  return row ?? null
}

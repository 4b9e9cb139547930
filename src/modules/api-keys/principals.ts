// Who is calling: bearer token → {account, scope, plan}, cached per node and dropped over the bus
// when the API key is deleted or rotated, or the account's plan changes. last_used_at is batched.
import type { Bus } from '../../infra/bus'
import { API_TOKEN_RE, sha256Hex } from '../../infra/crypto'
import type { Sql } from '../../infra/db'
import { DigestMemo } from '../../infra/digest-memo'
import type { Plan } from '../../core/plans'
import type { Authenticator, Principal } from '../../core/principal'
import { FRESH, ReadThroughCache, type CacheRules } from '../../infra/read-through-cache'
import { findPrincipal, touchApiKeys } from './repo'

/** A principal as held in memory: stamped with the time its read started. */
type Entry = { principal: Principal; loadedAt: number }

export const hashToken = (token: string) => sha256Hex(`api-token:${token}`)

/** Authorization header → token hash for callers seen recently (see infra/digest-memo.ts). */
const KNOWN_HEADERS = 4096

/** Token hash → principal. No negative entries: an unknown token is read each time, as before. */
class PrincipalCache extends ReadThroughCache<Entry> {
  private byHash = new Map<string, Entry>()

  constructor(
    private sql: Sql,
    rules: CacheRules,
  ) {
    super(rules)
  }

  /** A fresh entry answers here (the shared rule, no virtual lookup); anything else takes the shared path. */
  override get(tokenHash: string, now = Date.now()): Entry | null | Promise<Entry | null> {
    const entry = this.byHash.get(tokenHash)
    if (entry !== undefined && this.freshness.check(entry.loadedAt, now) === FRESH) return entry
    return super.get(tokenHash, now)
  }

  protected async read(tokenHash: string, loadedAt: number): Promise<Entry | null> {
    const row = await findPrincipal(this.sql, tokenHash)
    if (!row) return null
    const principal = { apiKeyId: row.api_key_id, accountId: row.account_id, scope: row.scope, plan: row.plan as Plan, tokenHash }
    return { principal, loadedAt }
  }

  protected lookup(tokenHash: string): Entry | undefined {
    return this.byHash.get(tokenHash)
  }

  protected absentSince(): undefined {
    return undefined
  }

  protected keep(tokenHash: string, entry: Entry | null) {
    if (entry) this.byHash.set(tokenHash, entry)
    else this.byHash.delete(tokenHash)
  }

  protected drop(tokenHash: string) {
    this.byHash.delete(tokenHash)
  }

  protected dropAll() {
    this.byHash.clear()
  }

  has(tokenHash: string) {
    return this.byHash.has(tokenHash)
  }

  dropAccount(accountId: string) {
    for (const [hash, e] of this.byHash) if (e.principal.accountId === accountId) this.byHash.delete(hash)
    this.cancelReads() // a read in flight may carry the old plan
  }
}

/**
 * Freshness, collapsed loads and answers during an outage follow the shared read-through rules
 * (infra/read-through-cache.ts), as the key hot state does. A cached caller is answered
 * synchronously (no promise): this runs on every validate call.
 */
export class Principals implements Authenticator {
  private cache: PrincipalCache
  private lastUsed = new Map<string, number>()
  private unsubscribe: () => void
  /** Only headers whose token has an entry are remembered: garbage tokens cannot churn it. */
  private headers = new DigestMemo(KNOWN_HEADERS)

  constructor(
    private sql: Sql,
    bus: Bus,
    ttlMs: number,
    degradedTtlMs = ttlMs,
  ) {
    this.cache = new PrincipalCache(sql, { ttlMs, degradedTtlMs, trusted: (now) => bus.trusted(now) })
    this.unsubscribe = bus.subscribe((msg) => {
      if (msg.kind === 'api_key') this.cache.invalidate(msg.tokenHash)
      else if (msg.kind === 'account') this.cache.dropAccount(msg.accountId)
      else if (msg.kind === 'resync') this.cache.clear()
    })
  }

  /** The principal for an `Authorization` header value, or null (unknown, malformed, revoked). */
  authenticate(header: string | null | undefined, now = Date.now()): Principal | null | Promise<Principal | null> {
    if (!header) return null
    // A header seen before skips the parsing and the SHA-256 (it passed both when it was remembered).
    let tokenHash = this.headers.get(header)
    if (tokenHash === undefined) {
      // The auth scheme is case-insensitive (RFC 9110 §11.1); the token itself is not.
      const match = /^bearer +(\S+) *$/i.exec(header)
      if (!match) return null
      const token = match[1]
      if (!API_TOKEN_RE.test(token)) return null
      tokenHash = hashToken(token)
      if (this.cache.has(tokenHash)) this.headers.set(header, tokenHash)
    }
    const entry = this.cache.get(tokenHash, now)
    if (entry === null) return null
    if (entry instanceof Promise) return entry.then((e) => (e === null ? null : this.used(e.principal, now)))
    return this.used(entry.principal, now)
  }

  private used(principal: Principal, now: number): Principal {
    this.lastUsed.set(principal.apiKeyId, now)
    return principal
  }

  dropAccount(accountId: string) {
    this.cache.dropAccount(accountId)
  }

  /** Writes the batched last_used_at times; called on a timer and at shutdown. */
  async flush(): Promise<void> {
    if (this.lastUsed.size === 0) return
    const batch = this.lastUsed
    this.lastUsed = new Map()
    try {
      await touchApiKeys(this.sql, new Map([...batch].map(([id, at]) => [id, new Date(at)])))
    } catch (err) {
      for (const [id, t] of batch) if (!this.lastUsed.has(id)) this.lastUsed.set(id, t)
      throw err
    }
  }

  close() {
    this.unsubscribe()
  }
}

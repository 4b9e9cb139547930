// Who is calling: bearer token → {account, scope, plan}, cached per node and dropped over the bus
// when the API key is deleted or rotated, or the account's plan changes. last_used_at is batched.
import type { Bus } from '../../infra/bus'
import { API_TOKEN_RE, sha256Hex } from '../../infra/crypto'
import { isConnectionError, type Sql } from '../../infra/db'
import { DigestMemo } from '../../infra/digest-memo'
import type { Plan } from '../accounts/plans'
import { findPrincipal, touchApiKeys } from './repo'
import type { Scope } from './scopes'

export interface Principal {
  apiKeyId: string
  accountId: string
  scope: Scope
  plan: Plan
  tokenHash: string
}

type Entry = { principal: Principal; loadedAt: number }
type Flight = { promise: Promise<Principal | null>; cancelled: boolean }

const STALE_WAIT_MS = 1_000
/** After a connection error, how long known callers are answered from memory before Postgres is retried. */
const RETRY_UNREACHABLE_MS = 1_000

export const hashToken = (token: string) => sha256Hex(`api-token:${token}`)

/** Authorization header → token hash for callers seen recently (see infra/digest-memo.ts). */
const KNOWN_HEADERS = 4096

/**
 * Freshness follows the key hot state (validation/hot-state.ts): an entry is trusted for `ttlMs`, or
 * only `degradedTtlMs` while the bus is down (an API-key revocation may have been missed); past that
 * it is re-read, and while Postgres is unreachable the last known entry keeps answering. A cached
 * caller is answered synchronously (no promise): this runs on every validate call.
 */
export class Principals {
  private byHash = new Map<string, Entry>()
  private inflight = new Map<string, Flight>()
  private lastUsed = new Map<string, number>()
  private unreachableUntil = 0
  private unsubscribe: () => void
  /** Only headers whose token has an entry are remembered: garbage tokens cannot churn it. */
  private headers = new DigestMemo(KNOWN_HEADERS)

  constructor(
    private sql: Sql,
    private bus: Bus,
    private ttlMs: number,
    private degradedTtlMs = ttlMs,
  ) {
    this.unsubscribe = bus.subscribe((msg) => {
      if (msg.kind === 'api_key') this.forget(msg.tokenHash)
      else if (msg.kind === 'account') this.dropAccount(msg.accountId)
      else if (msg.kind === 'resync') this.clear()
    })
  }

  /** The principal for an `Authorization` header value, or null (unknown, malformed, revoked). */
  authenticate(header: string | null | undefined, now = Date.now()): Principal | null | Promise<Principal | null> {
    if (!header) return null
    // A header seen before skips the parsing and the SHA-256 (it passed both when it was remembered).
    let tokenHash = this.headers.get(header)
    let entry = tokenHash === undefined ? undefined : this.byHash.get(tokenHash)
    if (tokenHash === undefined) {
      // The auth scheme is case-insensitive (RFC 9110 §11.1); the token itself is not.
      const match = /^bearer +(\S+) *$/i.exec(header)
      if (!match) return null
      const token = match[1]
      if (!API_TOKEN_RE.test(token)) return null
      tokenHash = hashToken(token)
      entry = this.byHash.get(tokenHash)
      if (entry) this.headers.set(header, tokenHash)
    }
    const maxAge = this.bus.trusted(now) ? this.ttlMs : Math.min(this.ttlMs, this.degradedTtlMs)
    // Fresh, or Postgres failed us a moment ago (answer from memory instead of queueing behind it).
    if (entry && (now - entry.loadedAt < maxAge || now < this.unreachableUntil)) {
      this.lastUsed.set(entry.principal.apiKeyId, now)
      return entry.principal
    }
    return this.load(tokenHash, now)
  }

  private async load(tokenHash: string, now: number): Promise<Principal | null> {
    let flight = this.inflight.get(tokenHash)
    if (!flight) {
      const f: Flight = { promise: null as never, cancelled: false }
      f.promise = findPrincipal(this.sql, tokenHash)
        .then((row) => {
          this.unreachableUntil = 0
          const principal: Principal | null = row
            ? { apiKeyId: row.api_key_id, accountId: row.account_id, scope: row.scope, plan: row.plan as Plan, tokenHash }
            : null
          // A revocation that arrived while this read was in flight wins: do not store what it read.
          if (!f.cancelled) {
            if (principal) this.byHash.set(tokenHash, { principal, loadedAt: now })
            else this.byHash.delete(tokenHash)
          }
          return principal
        })
        .finally(() => {
          if (this.inflight.get(tokenHash) === f) this.inflight.delete(tokenHash)
        })
      this.inflight.set(tokenHash, f)
      flight = f
    }
    let principal: Principal | null
    const stale = this.byHash.get(tokenHash)
    try {
      if (!stale) principal = await flight.promise
      else {
        // A re-read that hangs must not hang a caller we know: after a second, the last entry answers.
        let timer: Timer | undefined
        const waited = new Promise<null>((resolve) => (timer = setTimeout(resolve, STALE_WAIT_MS, null)))
        principal = (await Promise.race([flight.promise, waited]).finally(() => clearTimeout(timer))) ?? null
        // (dropped meanwhile, by a resync or a revocation: only the read can answer, so wait for it)
        if (principal === null) principal = this.byHash.get(tokenHash) === stale ? stale.principal : await flight.promise
      }
    } catch (err) {
      // Postgres unreachable: a caller we knew keeps working (validation keeps answering in an outage).
      if (!isConnectionError(err)) throw err
      this.unreachableUntil = Date.now() + RETRY_UNREACHABLE_MS
      if (!stale) throw err
      principal = stale.principal
    }
    if (principal) this.lastUsed.set(principal.apiKeyId, now)
    return principal
  }

  private forget(tokenHash: string) {
    this.byHash.delete(tokenHash)
    const flight = this.inflight.get(tokenHash)
    if (flight) {
      flight.cancelled = true
      this.inflight.delete(tokenHash)
    }
  }

  private clear() {
    this.byHash.clear()
    for (const flight of this.inflight.values()) flight.cancelled = true
    this.inflight.clear()
  }

  dropAccount(accountId: string) {
    for (const [hash, e] of this.byHash) if (e.principal.accountId === accountId) this.byHash.delete(hash)
    for (const flight of this.inflight.values()) flight.cancelled = true // may carry the old plan
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

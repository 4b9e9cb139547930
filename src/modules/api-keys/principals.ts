// Who is calling: bearer token → {account, scope, plan}, cached per node and dropped over the bus
// when the API key is deleted or rotated, or the account's plan changes. last_used_at is batched.
import type { Bus } from '../../infra/bus'
import { API_TOKEN_RE, sha256Hex } from '../../infra/crypto'
import type { Sql } from '../../infra/db'
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

type Entry = { principal: Principal; expiresAt: number }

export const hashToken = (token: string) => sha256Hex(`api-token:${token}`)

export class Principals {
  private byHash = new Map<string, Entry>()
  private lastUsed = new Map<string, Date>()
  private unsubscribe: () => void

  constructor(
    private sql: Sql,
    bus: Bus,
    private ttlMs: number,
  ) {
    this.unsubscribe = bus.subscribe((msg) => {
      if (msg.kind === 'api_key') this.byHash.delete(msg.tokenHash)
      else if (msg.kind === 'account') this.dropAccount(msg.accountId)
      else if (msg.kind === 'resync') this.byHash.clear()
    })
  }

  /** The principal for an `Authorization` header value, or null (unknown, malformed, revoked). */
  async authenticate(header: string | null | undefined): Promise<Principal | null> {
    // The auth scheme is case-insensitive (RFC 9110 §11.1); the token itself is not.
    const match = header ? /^bearer +(\S+) *$/i.exec(header) : null
    if (!match) return null
    const token = match[1]
    if (!API_TOKEN_RE.test(token)) return null
    const tokenHash = hashToken(token)
    const now = Date.now()
    let entry = this.byHash.get(tokenHash)
    if (!entry || entry.expiresAt <= now) {
      const row = await findPrincipal(this.sql, tokenHash)
      if (!row) {
        this.byHash.delete(tokenHash)
        return null
      }
      const principal: Principal = {
        apiKeyId: row.api_key_id,
        accountId: row.account_id,
        scope: row.scope,
        plan: row.plan as Plan,
        tokenHash,
      }
      entry = { principal, expiresAt: now + this.ttlMs }
      this.byHash.set(tokenHash, entry)
    }
    this.lastUsed.set(entry.principal.apiKeyId, new Date(now))
    return entry.principal
  }

  dropAccount(accountId: string) {
    for (const [hash, e] of this.byHash) if (e.principal.accountId === accountId) this.byHash.delete(hash)
  }

  /** Writes the batched last_used_at times; called on a timer and at shutdown. */
  async flush(): Promise<void> {
    if (this.lastUsed.size === 0) return
    const batch = this.lastUsed
    this.lastUsed = new Map()
    try {
      await touchApiKeys(this.sql, batch)
    } catch (err) {
      for (const [id, t] of batch) if (!this.lastUsed.has(id)) this.lastUsed.set(id, t)
      throw err
    }
  }

  close() {
    this.unsubscribe()
  }
}

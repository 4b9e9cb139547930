// Imported keys' own lookups (docs/api.md, "Import and export"), tried only when a value's portable hash finds nothing in the
// caller's account, so the hot path of every other key is untouched:
// 1. the account-scoped hash: a value another account also holds is stored under it in this one;
// 2. the pending hash of its SHA-256: a key imported by hash only. Found there, the key is re-hashed
//    into its portable (or scoped) hash in Postgres, every node drops both hashes, and it is served as
//    any key from then on (its next validate takes the fast path).
// Each lookup goes through the hot state, so an unknown value costs negative entries, not queries.
import type { Bus } from '../../infra/bus'
import { keyPrefixOf, pendingKeyHash, portableKeyHash, scopedKeyHash, sha256Hex } from '../../infra/crypto'
import type { Sql } from '../../infra/db'
import { hotKeyOf, keyHashOf, type HotState, type KeyState } from './hot/hot-state'

export interface Found {
  hotKey: string
  state: KeyState
}

export class ImportedLookup {
  constructor(
    private hot: HotState,
    private sql: Sql,
    private bus: Bus,
  ) {}

  /** `portableHot`: the value's portable hash (base64), which found nothing in this account. */
  find(accountId: string, value: string, portableHot: string, now: number): Found | null | Promise<Found | null> {
    const scopedHot = scopedKeyHash(accountId, keyHashOf(portableHot), 'base64')
    const scoped = this.hot.get(scopedHot, now)
    const mine = (s: KeyState | null): s is KeyState => s !== null && s.accountId === accountId
    if (scoped instanceof Promise) {
      return scoped.then((s) => (mine(s) ? { hotKey: scopedHot, state: s } : this.findPending(accountId, value, Date.now())))
    }
    if (mine(scoped)) return { hotKey: scopedHot, state: scoped }
    return this.findPending(accountId, value, now)
  }

  private findPending(accountId: string, value: string, now: number): Found | null | Promise<Found | null> {
    const pendingHot = pendingKeyHash(accountId, sha256Hex(value.trim()), 'base64')
    const pending = this.hot.get(pendingHot, now)
    if (pending === null) return null
    const claim = (s: KeyState | null) => (s !== null && s.accountId === accountId ? this.rehash(accountId, value, pendingHot) : null)
    return pending instanceof Promise ? pending.then(claim) : claim(pending)
  }

  /** The first validate of a hash-only import: the key moves to its value's own hash, on every node. */
  private async rehash(accountId: string, value: string, pendingHot: string): Promise<Found | null> {
    const portable = portableKeyHash(value)
    if (portable === null) return null
    const pendingHex = keyHashOf(pendingHot)
    let target: string | null
    try {
      target = await this.sql.begin(async (tx) => {
        const [row] = await tx<{ id: string }[]>`select id from license_keys where key_hash = ${pendingHex} and account_id = ${accountId} for update`
        if (!row) return null // another node re-hashed it meanwhile
        const [taken] = await tx<{ account_id: string }[]>`select account_id from license_keys where key_hash = ${portable}`
        const target = taken ? scopedKeyHash(accountId, portable) : portable
        await tx`update license_keys set key_hash = ${target}, portable_hash = ${taken ? portable : null}, key_prefix = ${keyPrefixOf(value)},
            updated_at = now() where id = ${row.id}`
        await tx`delete from key_sha256_imports where key_id = ${row.id}`
        return target
      })
    } catch (err) {
      // the value's hash was taken meanwhile by a concurrent write: this validate is not_found, the next one retries
      if ((err as { code?: string }).code === '23505') return null
      throw err
    }
    if (target === null) {
      // re-hashed by another node, which dropped both hashes everywhere: look the value up again
      this.hot.invalidate(pendingHot)
      return this.settled(accountId, [hotKeyOf(portable), scopedKeyHash(accountId, portable, 'base64')])
    }
    await this.bus.publish({ kind: 'keys', keyHashes: [pendingHex, target] })
    return this.settled(accountId, [hotKeyOf(target)])
  }

  private async settled(accountId: string, hotKeys: string[]): Promise<Found | null> {
    for (const hotKey of hotKeys) {
      const state = await this.hot.get(hotKey)
      if (state !== null && state.accountId === accountId) return { hotKey, state }
    }
    return null
  }
}

// Repeat validations of a known device update last_validated_at and app_version off the request path:
// the request records into a map (one entry per key and device, newest wins), a background job
// writes the map in batches, and shutdown writes what is left. A failed write (Postgres down) keeps
// the entries for the next flush instead of losing them.
import type { Sql } from '../../infra/db'
import { touchActivations, type Seen } from './repo'

const CHUNK = 2_000
/** While Postgres is unreachable the map is bounded: beyond this, the oldest pending updates are dropped. */
const MAX_PENDING = 500_000

export class LastSeenWriter {
  private pending = new Map<string, Seen>()

  constructor(private sql: Sql) {}

  get size() {
    return this.pending.size
  }

  /** `hotKey`: the key's hot-state key (base64 digest); converted to key_hash only when written. */
  record(hotKey: string, fingerprint: string, appVersion: string | null, at = Date.now()) {
    const id = hotKey + fingerprint
    const seen = this.pending.get(id)
    if (seen) {
      seen.at = at
      if (appVersion !== null) seen.appVersion = appVersion
      return
    }
    if (this.pending.size >= MAX_PENDING) {
      const oldest = this.pending.keys().next().value
      if (oldest !== undefined) this.pending.delete(oldest)
    }
    this.pending.set(id, { hotKey, fingerprint, at, appVersion })
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return
    const batch = [...this.pending.values()]
    this.pending = new Map()
    for (let i = 0; i < batch.length; i += CHUNK) {
      try {
        await touchActivations(this.sql, batch.slice(i, i + CHUNK))
      } catch (err) {
        this.requeue(batch.slice(i))
        throw err
      }
    }
  }

  /** Puts unwritten entries back unless a newer validation of the same device was recorded meanwhile. */
  private requeue(rest: Seen[]) {
    for (const s of rest) {
      const id = s.hotKey + s.fingerprint
      const newer = this.pending.get(id)
      if (!newer) this.pending.set(id, s)
      else if (newer.appVersion === null) newer.appVersion = s.appVersion
    }
  }
}

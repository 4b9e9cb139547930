// Repeat validations of a known device update last_validated_at, app_version, device_name and the
// stored components (machine identity's drift, docs/integrating.md "Identifying machines") off the
// request path:
// the request records into a map (one entry per key and device, newest wins), a background job
// writes the map in batches, and shutdown writes what is left. A failed write (Postgres down) keeps
// the entries for the next flush instead of losing them.
import type { Sql } from '../../infra/db'
import type { Components } from '../../core/component-match'
import { touchActivations, type Seen } from './repo'

const CHUNK = 2_000
/** While Postgres is unreachable the map is bounded: beyond this, the oldest pending updates are dropped. */
const MAX_PENDING = 500_000

/**
 * Key → device → pending update. Two levels rather than one map keyed by key + fingerprint: the hot
 * key string is the same object on every call (its hash is cached), so only the 64-char fingerprint
 * is hashed, and no 108-char string is built per request (measured ≈150 ns less per call).
 */
type Pending = Map<string, Map<string, Seen>>

export class LastSeenWriter {
  private pending: Pending = new Map()
  private count = 0
  /** The write in progress: flushes run one after another. */
  private writing: Promise<void> = Promise.resolve()
  /** Updates taken by a flush and not yet written: still shown by pendingFor meanwhile. */
  private taken: Pending[] = []

  constructor(private sql: Sql) {}

  get size() {
    return this.count
  }

  /**
   * `hotKey`: the key's hot-state key (base64 digest); converted to key_hash only when written.
   * `deviceName`: undefined when the call sent none (the stored name is kept). The hot state does not
   * hold names (it stays compact), so a name is not compared with the stored one here: the newest one
   * sent rides along with the batched write (setting an unchanged name changes nothing).
   */
  record(hotKey: string, fingerprint: string, appVersion: string | null, at = Date.now(), deviceName?: string, components?: Components) {
    let devices = this.pending.get(hotKey)
    const seen = devices?.get(fingerprint)
    if (seen) {
      seen.at = at
      if (appVersion !== null) seen.appVersion = appVersion
      if (deviceName !== undefined) seen.deviceName = deviceName
      if (components !== undefined) seen.components = components
      return
    }
    if (this.count >= MAX_PENDING) this.dropOldest()
    if (!devices) this.pending.set(hotKey, (devices = new Map()))
    devices.set(fingerprint, { hotKey, fingerprint, at, appVersion, deviceName: deviceName ?? null, components: components ?? null })
    this.count++
  }

  /**
   * The updates waiting for one key's devices, newest first: those not yet taken, then those a flush
   * under way is writing. Taken before the devices list reads Postgres, so an update written while
   * that read runs is still seen here (the maps are the flush's own, kept as they were).
   */
  pendingOf(hotKey: string): (fingerprint: string) => Readonly<Seen> | undefined {
    const maps = [this.pending.get(hotKey), ...this.taken.map((t) => t.get(hotKey)).reverse()].filter((m) => m !== undefined)
    return (fingerprint) => {
      for (const m of maps) {
        const seen = m.get(fingerprint)
        if (seen !== undefined) return seen
      }
      return undefined
    }
  }

  /**
   * Drops the update waiting for a device that has just taken a new activation: it was recorded for
   * the device's previous activation, and its app version and name must not overwrite the new ones.
   */
  forget(hotKey: string, fingerprint: string) {
    const devices = this.pending.get(hotKey)
    if (devices?.delete(fingerprint)) {
      this.count--
      if (devices.size === 0) this.pending.delete(hotKey)
    }
  }

  private dropOldest() {
    for (const [hotKey, devices] of this.pending) {
      for (const fingerprint of devices.keys()) {
        devices.delete(fingerprint)
        this.count--
        break
      }
      if (devices.size === 0) this.pending.delete(hotKey)
      return
    }
  }

  /**
   * Writes every update recorded before the call, and resolves only when they are all in Postgres,
   * also those an earlier flush is still writing (the inactivity release's barrier relies on it):
   * the pending updates are taken at once, and written after the writes already under way.
   */
  flush(): Promise<void> {
    const batch: Seen[] = []
    const taken = this.pending
    if (this.count > 0) {
      for (const devices of taken.values()) for (const seen of devices.values()) batch.push(seen)
      this.pending = new Map()
      this.count = 0
      this.taken.push(taken)
    }
    const run = this.writing
      .catch(() => {})
      .then(() => this.write(batch))
      .finally(() => {
        const i = this.taken.indexOf(taken)
        if (i >= 0) this.taken.splice(i, 1)
      })
    this.writing = run
    return run
  }

  private async write(batch: Seen[]): Promise<void> {
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
      let devices = this.pending.get(s.hotKey)
      const newer = devices?.get(s.fingerprint)
      if (newer) {
        if (newer.appVersion === null) newer.appVersion = s.appVersion
        if (newer.deviceName === null) newer.deviceName = s.deviceName
        if (newer.components === null) newer.components = s.components
        continue
      }
      if (!devices) this.pending.set(s.hotKey, (devices = new Map()))
      devices.set(s.fingerprint, s)
      this.count++
    }
  }
}

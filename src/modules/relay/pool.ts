// The relay's floating seats: one pool of `seats` leases for its one key (docs/integrating.md,
// "Floating seats on your customer's network"). Answers come from memory, as on a node; what would be
// lost on a crash is written before the answer:
// - a new lease is written (committed) before it is answered;
// - a renewal moves the lease's end in memory on every validate, and on disk only when the end written
//   there is closer than lease_seconds: it is written as now + lease_seconds + SLACK, so after a restart
//   (or a kill -9) every lease holds at least as long as it did in memory, and at most SLACK longer,
//   within the promise that an unrenewed lease is free within lease_seconds + 5 s. One write per device
//   every SLACK at most, however often it validates.
import { AppError } from '../../core/errors'
import { keyPrefixOf, portableKeyHash } from '../../infra/crypto'
import type { DeactivateBody, DevicesBody, ValidateAnswer, ValidateBody } from '../validation/model'
import { REFUSED } from '../validation/answers'
import type { RelayStore } from './store'
import type { RelayLicense } from './text'

export const SLACK_MS = 5_000

/** What check-in last heard about the relay and its key (the upstream's status). */
export type UpstreamStatus = 'valid' | 'revoked' | 'suspended' | 'expired' | 'deleted'
export const UPSTREAM_STATUSES: readonly UpstreamStatus[] = ['valid', 'revoked', 'suspended', 'expired', 'deleted']

interface Lease {
  fingerprint: string
  name: string | null
  appVersion: string | null
  since: number
  /** in memory: the end of the lease (the last validate + lease_seconds) */
  until: number
  /** on disk */
  written: number
}

export interface LeaseView {
  device_fingerprint: string
  device_name: string | null
  app_version: string | null
  since: string
  until: string
}

type Refusal = Extract<ValidateAnswer, { valid: false }>

export class LeasePool {
  license: RelayLicense | null = null
  /** The key value's portable hash (infra/crypto.ts), learned on `relay load --key` */
  keyHash: string | null = null
  keyPrefix: string | null = null
  status: UpstreamStatus = 'valid'
  lastCheckInAt: number | null = null
  /** Most leases held at once since the last check-in (reported, then reset). */
  peak = 0
  private readonly leases = new Map<string, Lease>()

  constructor(private readonly store: RelayStore, private readonly now: () => number = Date.now) {
    this.reload()
    const t = this.now()
    const gone: string[] = []
    for (const l of store.leases()) {
      if (l.until <= t) gone.push(l.fingerprint)
      else this.leases.set(l.fingerprint, { ...l, written: l.until })
    }
    store.removeLeases(gone)
    this.peak = this.leases.size
  }

  /** Reads the license and the check-in state from the store (after `relay load` or a renewal). */
  reload(): void {
    const text = this.store.meta('license_json')
    this.license = text ? (JSON.parse(text) as RelayLicense) : null
    this.keyHash = this.store.meta('key_hash')
    this.keyPrefix = this.store.meta('key_prefix')
    this.seen?.clear()
    const status = this.store.meta('status') as UpstreamStatus | null
    this.status = status && UPSTREAM_STATUSES.includes(status) ? status : 'valid'
    const at = this.store.meta('last_check_in_at')
    this.lastCheckInAt = at ? Number(at) : null
  }

  /** The refusal every call of the key gets now, or null while the relay may answer valid. */
  private keyRefusal(now: number): Refusal | null {
    const p = this.license!.payload
    if (this.status === 'revoked' || this.status === 'deleted') return REFUSED.revoked as Refusal
    if (this.status === 'suspended') return REFUSED.suspended as Refusal
    if (this.status === 'expired') return REFUSED.expired as Refusal
    if (Date.parse(p.expires_at) <= now) return REFUSED.expired as Refusal
    if (p.key_expires_at !== null && Date.parse(p.key_expires_at) <= now) return REFUSED.expired as Refusal
    return null
  }

  /** The last key values sent and whether each is ours: apps send the same value again and again. */
  private readonly seen = new Map<string, boolean>()

  /** Whether `key` (and `productId` when given) is this relay's key. */
  private isOurs(key: string, productId: string | null | undefined): boolean {
    if (this.license === null || this.keyHash === null) return false
    if (productId != null && productId !== this.license.payload.product_id) return false
    let ours = this.seen.get(key)
    if (ours === undefined) {
      ours = portableKeyHash(key) === this.keyHash
      if (this.seen.size >= 1024) this.seen.clear() // bounded: a flood of guesses cannot grow it
      this.seen.set(key, ours)
    }
    return ours
  }

  held(now = this.now()): number {
    let n = 0
    for (const l of this.leases.values()) if (l.until > now) n++
    return n
  }

  validate(body: ValidateBody): ValidateAnswer {
    const now = this.now()
    if (!this.isOurs(body.key, body.product_id)) return REFUSED.not_found
    const refused = this.keyRefusal(now)
    if (refused) return refused
    const p = this.license!.payload
    if (body.require_entitlements) {
      const missing = body.require_entitlements.filter((code) => !Object.hasOwn(p.entitlements, code))
      if (missing.length) return { valid: false, reason: 'entitlements_missing', missing }
    }
    const fingerprint = body.device_fingerprint.toLowerCase()
    const until = now + p.lease_seconds * 1000
    let lease = this.leases.get(fingerprint)
    if (lease !== undefined && lease.until > now) {
      lease.until = until
      const name = body.device_name ?? lease.name
      const appVersion = body.app_version ?? lease.appVersion
      if (lease.written < until || name !== lease.name || appVersion !== lease.appVersion) {
        lease.name = name
        lease.appVersion = appVersion
        lease.written = until + SLACK_MS
        this.store.writeRenewal({ ...lease, until: lease.written })
      }
    } else {
      if (this.sweep(now) >= p.seats) return REFUSED.activation_limit
      lease = { fingerprint, name: body.device_name ?? null, appVersion: body.app_version ?? null, since: now, until, written: until + SLACK_MS }
      this.store.writeLease({ ...lease, until: lease.written }) // committed before the answer
      this.leases.set(fingerprint, lease)
      if (this.leases.size > this.peak) this.peak = this.leases.size
    }
    return {
      valid: true,
      plan: p.plan,
      expires_at: p.key_expires_at === null ? null : new Date(p.key_expires_at).toISOString(),
      activations_used: this.leases.size,
      activation_limit: p.seats,
      policy_id: null,
      entitlements: p.entitlements,
      expired: false,
      grace_until: null,
      credits_remaining: null,
      lease_expires_at: new Date(until).toISOString(),
    } as ValidateAnswer
  }

  deactivate(body: DeactivateBody): { deactivated: boolean; activations_used: number; activation_limit: number } {
    if (!this.isOurs(body.key, null)) return { deactivated: false, activations_used: 0, activation_limit: 0 }
    const now = this.now()
    const deactivated = this.release(body.device_fingerprint.toLowerCase(), now)
    return { deactivated, activations_used: this.sweep(now), activation_limit: this.license!.payload.seats }
  }

  /** Frees a device's lease at once (the holder's deactivate, or the page's release button). */
  release(fingerprint: string, now = this.now()): boolean {
    const lease = this.leases.get(fingerprint)
    if (lease === undefined) return false
    this.store.removeLease(fingerprint)
    this.leases.delete(fingerprint)
    return lease.until > now
  }

  devices(body: DevicesBody) {
    if (!this.isOurs(body.key, body.product_id)) throw new AppError('not_found', 'No such key')
    const now = this.now()
    this.sweep(now)
    const p = this.license!.payload
    const refused = this.keyRefusal(now)
    const status = refused === null ? 'active' : (refused.reason as 'revoked' | 'suspended' | 'expired')
    const devices = [...this.leases.values()]
      .sort((a, b) => a.since - b.since)
      .map((l) => ({
        device_fingerprint: l.fingerprint,
        device_name: l.name,
        app_version: l.appVersion,
        country: null,
        activated_at: new Date(l.since).toISOString(),
        last_validated_at: new Date(l.until - p.lease_seconds * 1000).toISOString(),
        lease_expires_at: new Date(l.until).toISOString(),
      }))
    return { status, activation_limit: p.seats, activations_used: devices.length, deactivations_allowed: null, deactivations_used: 0, devices }
  }

  /** Drops leases past their end (memory and disk); returns the leases held. */
  sweep(now = this.now()): number {
    const gone: string[] = []
    for (const l of this.leases.values()) if (l.until <= now) gone.push(l.fingerprint)
    if (gone.length) {
      this.store.removeLeases(gone)
      for (const f of gone) this.leases.delete(f)
    }
    return this.leases.size
  }

  list(now = this.now()): LeaseView[] {
    this.sweep(now)
    return [...this.leases.values()]
      .sort((a, b) => a.since - b.since)
      .map((l) => ({ device_fingerprint: l.fingerprint, device_name: l.name, app_version: l.appVersion, since: new Date(l.since).toISOString(), until: new Date(l.until).toISOString() }))
  }

  /** Installs a verified license (a load or a renewal) and, on a load, the key value it serves. */
  install(license: RelayLicense, keyValue?: string): void {
    const metas: Record<string, string> = { license_json: JSON.stringify(license) }
    if (keyValue !== undefined) {
      metas.key_hash = portableKeyHash(keyValue)!
      metas.key_prefix = keyPrefixOf(keyValue)
    }
    // a new license for the same relay is a renewal: the upstream said valid when it issued it
    metas.status = 'valid'
    this.store.setMetas(metas)
    this.reload()
  }

  /** Records a check-in's answer. */
  checkedIn(status: UpstreamStatus, at: number): void {
    this.store.setMetas({ status, last_check_in_at: String(at) })
    this.status = status
    this.lastCheckInAt = at
  }
}

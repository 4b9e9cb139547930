// Grace: the last verified valid answer of a key, kept with its signature and the exact request it
// answered, stands in while the service cannot be heard. Each product and key has its own slot, so two
// apps (or two keys) sharing one storage never overwrite each other's answer; the latest clock value
// seen is kept beside them to notice a clock set back.
import { CLOCK_SKEW_MS } from './clock.js'
import { parseJsonText, sha256, toHex } from './encoding.js'
import { toValid, type ValidResult } from './answers.js'
import type { KeywardStorage } from './storage.js'
import { verifyStored, type KeyResolver, type SignedAnswer } from './signature.js'

const LAST_SEEN = 'last-seen'
const VALIDATE = '/v1/validate'

/**
 * How the service compares keys: for a value in Keyward's format, case, surrounding spaces and
 * hyphens do not matter; any other value (a key imported from another system) is compared exactly,
 * trimmed, so a stored answer for `Abc-1` never serves `abc-1`.
 */
const normalizeKey = (key: string) => {
  const canonical = key.trim().toUpperCase().replace(/-/g, '')
  return /^[0-9A-HJKMNP-TV-Z]{25}$/.test(canonical) ? canonical : key.trim()
}

export interface GraceOptions {
  storage: KeywardStorage
  /** The stored answer's signer, looked up without the network (the service is away when grace is read). */
  resolve: KeyResolver
  graceSeconds: number
  productId: string | undefined
  now: () => number
}

export class GraceStore {
  private slots = new Map<string, string>()

  constructor(private readonly o: GraceOptions) {}

  /** The storage name of a key's answer: `answer:` + a hash of product and key (the key itself is not written as a name). */
  async slotOf(key: string): Promise<string> {
    const input = `keyward-grace/v1\n${this.o.productId ?? ''}\n${normalizeKey(key)}`
    let slot = this.slots.get(input)
    if (!slot) {
      slot = `answer:${toHex((await sha256(input)).slice(0, 16))}`
      this.slots.set(input, slot)
    }
    return slot
  }

  async save(key: string, answer: SignedAnswer): Promise<void> {
    await this.o.storage.set(await this.slotOf(key), JSON.stringify(answer))
  }

  /** Forgets the key's stored answer if it is this device's (or unreadable); another device's stays. */
  async forget(key: string, fingerprint: string): Promise<void> {
    const slot = await this.slotOf(key)
    const raw = await this.o.storage.get(slot)
    if (raw === null) return
    const request = requestOf(parseJsonText(raw))
    if (!request || request.device_fingerprint === fingerprint) await this.o.storage.remove(slot)
  }

  /** Records the latest clock value seen and returns the one stored before (0 when none). */
  async touchClock(): Promise<number> {
    const before = Number((await this.o.storage.get(LAST_SEEN)) ?? 0) || 0
    const now = this.o.now()
    if (now > before) await this.o.storage.set(LAST_SEEN, String(now))
    return before
  }

  /**
   * The key's stored answer, marked offline, if it is genuine (signature over the stored request and
   * body, by a signer the root vouches for and the cached key set does not mark revoked), answered this
   * very key, device and product, is younger than graceSeconds, and the clock has not gone back more
   * than CLOCK_SKEW_MS (since the latest time seen, or before the answer's time).
   */
  async read(key: string, fingerprint: string, lastSeen: number): Promise<ValidResult | null> {
    const raw = await this.o.storage.get(await this.slotOf(key))
    const stored = raw ? (parseJsonText(raw) as Partial<SignedAnswer> | null) : null
    if (!stored || stored.path !== VALIDATE || typeof stored.t !== 'number') return null
    const request = requestOf(stored)
    if (!request || typeof request.key !== 'string' || normalizeKey(request.key) !== normalizeKey(key)) return null
    if (request.device_fingerprint !== fingerprint || request.product_id !== this.o.productId) return null
    const now = this.o.now()
    if (now < lastSeen - CLOCK_SKEW_MS || now < stored.t - CLOCK_SKEW_MS) return null // the clock went back
    if (now - stored.t > this.o.graceSeconds * 1000) return null
    if (!(await verifyStored(this.o.resolve, stored as SignedAnswer))) return null
    const json = parseJsonText(stored.body!)
    return json?.valid === true ? toValid(json, true, new Date(stored.t)) : null
  }
}

/** The request a stored answer answered (its exact text is stored, and its digest signed). */
function requestOf(stored: Partial<SignedAnswer> | null): { key?: unknown; device_fingerprint?: unknown; product_id?: unknown } | null {
  if (!stored || typeof stored.request !== 'string') return null
  const request = parseJsonText(stored.request)
  return request && typeof request === 'object' ? request : null
}

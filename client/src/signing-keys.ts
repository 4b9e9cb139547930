// The chain of trust, as the repository's docs/api.md ("Signing keys") writes it: the app pins the
// account's root public key; the root certifies signing keys (a KWCERT1 certificate) and signs the key
// set (GET /v1/offline/keys); a signing key signs answers and licenses. So a signature by any key the
// root certified verifies with nothing but the pinned root, and a rotation needs no app update. The key
// set is what tells an app that a certified key was revoked: it is cached in the storage, refreshed at
// most once a day while online, and at once when a signer's kid is not in the cached set.
// A Keyward Relay (the repository's docs/integrating.md, "Floating seats on your customer's network")
// signs with its own key: its answers carry a two-link chain in Keyward-Certificate, the relay's
// KWCERT1 (kid = its relay id, with a `scope`: relay_id, key_id, seats, expires_at) signed by the
// account's signer, then the signer's KWCERT1 when the signer is not the root. The relay's certificate
// is refused once its scope expired, when the signer is revoked, and when it is for another key than
// the app's (`keyId`, when the app knows it).
import { canonicalJson } from './canonical.js'
import { fromBase64Loose, fromUtf8, parseJsonText, sha256Bytes, toHex, utf8 } from './encoding.js'
import type { KeywardStorage } from './storage.js'
import { importPublicKey, type VerifyKey } from './signature.js'

/** How long a fetched key set is fresh: the SDK asks for a new one at most once a day while online. */
export const KEY_SET_MAX_AGE_MS = 86_400_000
/** After a failed fetch (offline, a 5xx, a bad signature) the next try waits this long. */
const RETRY_AFTER_FAILURE_MS = 60 * 60_000
/** After a failed fetch, an unknown kid asks again no sooner than this (an app offline for good is not slowed). */
const UNKNOWN_KID_RETRY_MS = 60_000
const MAX_CERTIFICATE = 2048
const MAX_KEY_SET = 1024 * 1024 // revoked keys stay listed for good: room for hundreds
const STATES = new Set(['pending', 'active', 'retired', 'revoked'])

/** A key's id: the first 32 hex of the SHA-256 of its raw public key (the root's and every signing key's). */
export const kidOf = async (raw: Uint8Array) => toHex((await sha256Bytes(raw)).slice(0, 16))

export interface Root {
  key: VerifyKey
  raw: Uint8Array
  kid: string
}

/** Imports the pinned root (raw base64 or SPKI PEM) and names it by its kid. */
export async function importRoot(publicKey: string | Uint8Array): Promise<Root> {
  const key = await importPublicKey(publicKey, true)
  const raw = new Uint8Array(await crypto.subtle.exportKey('raw', key as CryptoKey))
  return { key, raw, kid: await kidOf(raw) }
}

export type SigningKeyState = 'pending' | 'active' | 'retired' | 'revoked'

export interface KeySetEntry {
  kid: string
  public_key: string
  state: SigningKeyState
  certificate: string
  created_at: string
  activated_at: string | null
  revoked_at: string | null
}

/** The account's key set as GET /v1/offline/keys answers it, its signature checked against the root. */
export interface KeySet {
  root: { kid: string; public_key: string }
  keys: KeySetEntry[]
  issued_at: string
  signature: string
}

/** Why a signer cannot be trusted; the caller turns it into its own error (SignatureError, a license refusal). */
export class TrustFailure extends Error {
  constructor(detail: string, readonly revoked = false) {
    super(detail)
  }
}

interface Certificate {
  kid: string
  raw: Uint8Array
  accountId: string
  key: VerifyKey
}

interface Cached {
  set: KeySet
  fetchedAt: number
  /** The account the root's certificates in the set name (a certificate naming another is refused). */
  accountId: string | null
}

export interface TrustOptions {
  root: Promise<Root>
  storage: KeywardStorage
  /** GET /v1/offline/keys: resolves with the parsed body of a 200, rejects otherwise. */
  fetchKeySet: () => Promise<unknown>
  now: () => number
  /** The key the app holds, when it knows its id: a relay licensed for another key is refused. */
  keyId?: string
}

interface RelayCertificate {
  kid: string
  raw: Uint8Array
  accountId: string
  keyId: string
  expiresAt: number
  key: VerifyKey
}

export type Reach = 'online' | 'offline'

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i])

export class Trust {
  private cached: Cached | null | undefined // undefined: storage not read yet
  private loading: Promise<Cached | null> | null = null
  private refreshing: Promise<boolean> | null = null
  private failedAt = -Infinity
  private readonly askedFor = new Set<string>()
  private readonly certificates = new Map<string, Certificate>()
  private readonly keys = new Map<string, Promise<VerifyKey>>()

  constructor(private readonly o: TrustOptions) {}

  /**
   * The key that must have signed for `kid`: the root itself, or a key the root certified (through
   * `certificate`, or through the cached key set). `online`: an unknown kid first refreshes the key
   * set (once per kid). Throws TrustFailure for a forged or mismatched certificate, a kid the key set
   * marks revoked, or a kid nothing vouches for.
   */
  async keyFor(kid: string, certificate: string | null, reach: Reach, accountId?: string): Promise<VerifyKey> {
    const root = await this.o.root
    if (kid === root.kid) return root.key
    if (certificate !== null && isRelayChain(certificate)) return this.relayKey(root, kid, certificate, reach, accountId)
    const cert = certificate === null ? null : await this.certificate(root, certificate)
    if (cert && cert.kid !== kid) throw new TrustFailure(`the certificate is for the key ${cert.kid}, not for the signer ${kid}`)
    let known = await this.load()
    let entry = known?.set.keys.find((k) => k.kid === kid)
    if (!entry && reach === 'online' && !this.askedFor.has(kid) && this.o.now() - this.failedAt >= UNKNOWN_KID_RETRY_MS) {
      if (await this.refresh()) this.askedFor.add(kid)
      known = await this.load()
      entry = known?.set.keys.find((k) => k.kid === kid)
    }
    const account = accountId ?? known?.accountId
    if (cert && account && cert.accountId !== account) throw new TrustFailure(`the certificate of ${kid} is for another account`)
    if (entry?.state === 'revoked') throw new TrustFailure(`signed by the signing key ${kid}, which the account revoked`, true)
    if (entry) {
      const raw = fromBase64Loose(entry.public_key)
      if (!raw || (cert && !sameBytes(cert.raw, raw))) throw new TrustFailure(`the certificate of ${kid} does not match the key set`)
      return cert?.key ?? this.importOnce(kid, raw)
    }
    if (cert) return cert.key // offline, or no key set yet: the certificate chain to the root is enough
    throw new TrustFailure(`signed by ${kid}, a key neither the pinned root, a certificate nor the key set vouches for`)
  }

  /** The cached key set (verified), or null when none was fetched yet. */
  async keySet(): Promise<KeySet | null> {
    return (await this.load())?.set ?? null
  }

  /** Refreshes the key set when the cached one is a day old (or missing); never throws. */
  async refreshIfDue(): Promise<void> {
    const known = await this.load()
    const now = this.o.now()
    if (now - this.failedAt < RETRY_AFTER_FAILURE_MS) return
    const age = known ? now - known.fetchedAt : Infinity
    // A clock set back far before the fetch time would otherwise never see the set as old.
    if (age >= KEY_SET_MAX_AGE_MS || age < -KEY_SET_MAX_AGE_MS) await this.refresh()
  }

  /** Fetches, verifies and stores the key set; true when a genuine one was received. Never throws. */
  refresh(): Promise<boolean> {
    this.refreshing ??= this.fetchAndStore().finally(() => (this.refreshing = null))
    return this.refreshing
  }

  private async fetchAndStore(): Promise<boolean> {
    try {
      const root = await this.o.root
      const body = await this.o.fetchKeySet()
      const cached = await this.verifySet(root, body, this.o.now())
      if (!cached) throw new Error('the key set is not signed by the pinned root')
      const before = await this.load()
      // An older set (replayed by a proxy) never replaces a newer one: it could hide a revocation.
      if (before && Date.parse(before.set.issued_at) > Date.parse(cached.set.issued_at)) {
        this.cached = { ...before, fetchedAt: cached.fetchedAt }
      } else {
        this.cached = cached
      }
      await this.o.storage.set(storageName(root), JSON.stringify({ set: this.cached.set, fetched_at: this.cached.fetchedAt }))
      return true
    } catch {
      this.failedAt = this.o.now()
      return false
    }
  }

  private load(): Promise<Cached | null> {
    if (this.cached !== undefined) return Promise.resolve(this.cached)
    this.loading ??= (async () => {
      const root = await this.o.root
      let cached: Cached | null = null
      try {
        const raw = await this.o.storage.get(storageName(root))
        const stored = raw ? parseJsonText(raw) : null
        if (stored && typeof stored.fetched_at === 'number') cached = await this.verifySet(root, stored.set, stored.fetched_at)
      } catch {
        cached = null // an unreadable cache is no cache: the next online call fetches a new set
      }
      if (this.cached === undefined) this.cached = cached
      return this.cached
    })()
    return this.loading
  }

  /** A key set whose signature verifies with the root over RFC 8785 of the rest, naming this root; else null. */
  private async verifySet(root: Root, body: unknown, fetchedAt: number): Promise<Cached | null> {
    if (!isKeySet(body) || JSON.stringify(body).length > MAX_KEY_SET) return null
    const rootRaw = fromBase64Loose(body.root.public_key)
    if (body.root.kid !== root.kid || !rootRaw || !sameBytes(rootRaw, root.raw)) return null
    const sig = fromBase64Loose(body.signature)
    if (!sig || sig.length !== 64) return null
    const { signature: _signature, ...unsigned } = body
    const genuine = await crypto.subtle.verify({ name: 'Ed25519' }, root.key as CryptoKey, sig as BufferSource, utf8(canonicalJson(unsigned)) as BufferSource)
    if (!genuine) return null
    const first = body.keys[0]
    const accountId = first ? (certificatePayload(first.certificate)?.account_id ?? null) : null
    return { set: body, fetchedAt, accountId: typeof accountId === 'string' ? accountId : null }
  }

  /** Reads a KWCERT1 certificate and checks it: the root's signature, and kid = kidOf(public_key). */
  private async certificate(root: Root, text: string): Promise<Certificate> {
    const known = this.certificates.get(text)
    if (known) return known
    const forged = new TrustFailure('the signer\'s certificate is not signed by the pinned root')
    if (text.length > MAX_CERTIFICATE) throw forged
    const parts = text.split('.')
    if (parts.length !== 3 || parts[0] !== 'KWCERT1') throw forged
    const sig = fromBase64Loose(parts[2]!)
    if (!sig || sig.length !== 64) throw forged
    const genuine = await crypto.subtle.verify({ name: 'Ed25519' }, root.key as CryptoKey, sig as BufferSource, utf8(`${parts[0]}.${parts[1]}`) as BufferSource)
    if (!genuine) throw forged
    const payload = certificatePayload(text)
    const raw = typeof payload?.public_key === 'string' ? fromBase64Loose(payload.public_key) : null
    if (!payload || typeof payload.kid !== 'string' || typeof payload.account_id !== 'string' || !raw || raw.length !== 32) throw new TrustFailure('the signer\'s certificate is malformed')
    if ((await kidOf(raw)) !== payload.kid) throw new TrustFailure('the signer\'s certificate names a kid that is not its key\'s')
    const cert = { kid: payload.kid, raw, accountId: payload.account_id, key: await this.importOnce(payload.kid, raw) }
    if (this.certificates.size >= 32) this.certificates.clear()
    this.certificates.set(text, cert)
    return cert
  }

  /**
   * A relay's key: its certificate (the chain's first link) signed by the account's signer (the root,
   * or the key the second link certifies, itself checked as any signer: a revoked one is refused),
   * naming this kid, not expired, for this account and (when known) for the app's key.
   */
  private async relayKey(root: Root, kid: string, chain: string, reach: Reach, accountId?: string): Promise<VerifyKey> {
    const links = chain.split(' ')
    if (links.length > 2 || links.some((l) => l.length === 0)) throw new TrustFailure('the relay\'s certificate chain is malformed')
    const [leaf, signerLink] = links as [string, string | undefined]
    let signer: VerifyKey = root.key
    if (signerLink !== undefined) {
      const cert = await this.certificate(root, signerLink)
      signer = await this.keyFor(cert.kid, signerLink, reach, accountId)
    }
    const relay = await this.relayCertificate(signer, leaf)
    if (relay.kid !== kid) throw new TrustFailure(`the relay certificate is for ${relay.kid}, not for the signer ${kid}`)
    const known = accountId ?? (await this.load())?.accountId
    if (known && relay.accountId !== known) throw new TrustFailure(`the relay ${kid} is another account's`)
    if (this.o.keyId !== undefined && relay.keyId !== this.o.keyId) throw new TrustFailure(`the relay ${kid} is licensed for another key (${relay.keyId})`)
    if (relay.expiresAt <= this.o.now()) throw new TrustFailure(`the license of the relay ${kid} expired at ${new Date(relay.expiresAt).toISOString()}`)
    return relay.key
  }

  private readonly relays = new Map<string, RelayCertificate>()

  private async relayCertificate(signer: VerifyKey, text: string): Promise<RelayCertificate> {
    const known = this.relays.get(text)
    if (known) return known
    const forged = new TrustFailure('the relay\'s certificate is not signed by the account\'s signer')
    if (text.length > MAX_CERTIFICATE) throw forged
    const parts = text.split('.')
    if (parts.length !== 3 || parts[0] !== 'KWCERT1') throw forged
    const sig = fromBase64Loose(parts[2]!)
    if (!sig || sig.length !== 64) throw forged
    const genuine = await crypto.subtle.verify({ name: 'Ed25519' }, signer as CryptoKey, sig as BufferSource, utf8(`${parts[0]}.${parts[1]}`) as BufferSource)
    if (!genuine) throw forged
    const p = certificatePayload(text)
    const scope = p?.scope as Record<string, unknown> | undefined
    const raw = typeof p?.public_key === 'string' ? fromBase64Loose(p.public_key) : null
    const expiresAt = typeof scope?.expires_at === 'string' ? Date.parse(scope.expires_at) : NaN
    if (!p || typeof p.kid !== 'string' || typeof p.account_id !== 'string' || !raw || raw.length !== 32 || !scope ||
      scope.relay_id !== p.kid || typeof scope.key_id !== 'string' || !Number.isFinite(expiresAt)) {
      throw new TrustFailure('the relay\'s certificate is malformed')
    }
    const cert = { kid: p.kid, raw, accountId: p.account_id, keyId: scope.key_id, expiresAt, key: await this.importOnce(p.kid, raw) }
    if (this.relays.size >= 32) this.relays.clear()
    this.relays.set(text, cert)
    return cert
  }

  private importOnce(kid: string, raw: Uint8Array): Promise<VerifyKey> {
    const name = `${kid}:${toHex(raw)}`
    let key = this.keys.get(name)
    if (!key) {
      key = importPublicKey(raw)
      if (this.keys.size >= 32) this.keys.clear()
      this.keys.set(name, key)
    }
    return key
  }
}

/** The storage entry of the key set: one per root, so apps of several accounts can share a storage. */
const storageName = (root: Root) => `signing-keys:${root.kid}`

/** A relay's chain: two links, or one whose payload carries a relay `scope`. */
function isRelayChain(certificate: string): boolean {
  if (certificate.includes(' ')) return true
  const p = certificatePayload(certificate)
  return !!p && typeof p.scope === 'object' && p.scope !== null
}

function certificatePayload(text: string): Record<string, unknown> | null {
  const part = text.split('.')[1]
  const bytes = part ? fromBase64Loose(part) : null
  const payload = bytes ? parseJsonText(fromUtf8(bytes)) : null
  return payload && typeof payload === 'object' && !Array.isArray(payload) ? payload : null
}

const isDate = (v: unknown) => v === null || (typeof v === 'string' && Number.isFinite(Date.parse(v)))

function isKeySet(v: any): v is KeySet {
  return (
    !!v && typeof v === 'object' && !!v.root && typeof v.root.kid === 'string' && typeof v.root.public_key === 'string' &&
    typeof v.signature === 'string' && typeof v.issued_at === 'string' && Number.isFinite(Date.parse(v.issued_at)) &&
    Array.isArray(v.keys) &&
    v.keys.every((k: any) =>
      !!k && typeof k === 'object' && typeof k.kid === 'string' && typeof k.public_key === 'string' && STATES.has(k.state) &&
      typeof k.certificate === 'string' && isDate(k.activated_at ?? null) && isDate(k.revoked_at ?? null))
  )
}

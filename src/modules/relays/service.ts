// Relays, the cloud side (docs/api.md, "Relays"): licensing a relay for seats of a key (the seats are
// taken in the seats room, modules/activations/relay-seats.ts), listing and deleting relays, and the
// relay's check-in. Every license and certificate is signed by the account's current signer.
import { isKeyRefused, keyRefusal } from '../activations/service'
import { createHash, createPublicKey, verify } from 'node:crypto'
import { Value } from '@sinclair/typebox/value'
import { AppError, invalid, notFound } from '../../core/errors'
import { parseComponents } from '../../core/component-match'
import { nestsDeeperThan } from '../../core/json-depth'
import type { Principal } from '../../core/principal'
import { iso } from '../../core/values'
import type { Deps } from '../../deps'
import { parseJson } from '../../http/kernel'
import { isId, newId } from '../../infra/crypto'
import { claimRelaySeats, releaseRelaySeats } from '../activations/relay-seats'
import { byApiKey, emit } from '../events/outbox'
import { signLicense } from '../offline/license'
import { licenseExpiry } from '../offline/service'
import { makeRelayCertificate } from '../signing/certificate'
import type { Signer, Signers } from '../signing/signers'
import { checkInGateOf } from './check-in-gate'
import {
  CheckInBody,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_RELAY_TTL_SECONDS,
  REQUEST_PREFIX,
  RelayRequestName,
  type CheckInAnswer,
  type CreatedRelay,
  type CreateRelayBody,
  type Relay,
  type RelayRequest,
} from './model'
import * as repo from './repo'

const B64URL = /^[A-Za-z0-9_-]+$/
const FINGERPRINT = /^[0-9a-fA-F]{64}$/

/** Reads a relay request code; a 400 naming the field (`request`, `request.<field>`) for anything else. */
export function readRequest(code: string): RelayRequest {
  const text = code.trim()
  if (!text.startsWith(REQUEST_PREFIX) || !B64URL.test(text.slice(REQUEST_PREFIX.length))) {
    throw invalid('request', `must be a relay request code (${REQUEST_PREFIX} + base64url), as \`keyward relay request\` prints it`)
  }
  let json: unknown
  try {
    const decoded = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(text.slice(REQUEST_PREFIX.length), 'base64url'))
    json = nestsDeeperThan(decoded) ? null : JSON.parse(decoded)
  } catch {
    json = null
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw invalid('request', 'must hold a JSON object')
  const r = json as Record<string, unknown>
  if (r.v !== 1) throw invalid('request.v', 'must be 1')
  const key = typeof r.relay_public_key === 'string' && B64URL.test(r.relay_public_key) ? Buffer.from(r.relay_public_key, 'base64url') : null
  if (key === null || key.length !== 32 || key.toString('base64url') !== r.relay_public_key) {
    throw invalid('request.relay_public_key', 'must be the base64url (no padding) of a 32-byte Ed25519 public key')
  }
  if (!publicKeyOf(key.toString('base64'))) throw invalid('request.relay_public_key', 'is not an Ed25519 public key')
  if (typeof r.device_fingerprint !== 'string' || !FINGERPRINT.test(r.device_fingerprint)) {
    throw invalid('request.device_fingerprint', 'must be 64 hexadecimal characters')
  }
  const components = parseComponents(r.components)
  if (!components.ok) throw invalid(`request.${components.field}`, components.detail)
  if (components.components === null) throw invalid('request.components', 'is required')
  if (typeof r.name !== 'string' || !Value.Check(RelayRequestName, r.name)) {
    throw invalid('request.name', 'must be 1 to 200 characters, no control characters')
  }
  return { publicKey: key, fingerprint: r.device_fingerprint.toLowerCase(), components: components.components, name: r.name }
}

/** The Ed25519 key from its raw 32 bytes in standard base64; null when it is not one. */
function publicKeyOf(raw: string) {
  try {
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw, 'base64').toString('base64url') }, format: 'jwk' })
  } catch {
    return null
  }
}

/** What a relay license says: the relay, its key's terms now, and the license's dates. */
interface LicenseTerms {
  accountId: string
  relayId: string
  licenseId: string
  keyId: string
  productId: string
  plan: string | null
  entitlements: Record<string, true | number | string>
  seats: number
  leaseSeconds: number
  publicKey: string
  fingerprint: string
  keyExpiresAt: Date | null
  issuedAt: Date
  expiresAt: Date
}

/** The relay license text: the payload signed by `signer`, its envelope carrying the relay's certificate. */
function relayLicense(signer: Signer, l: LicenseTerms): string {
  const issuedAt = iso(l.issuedAt)!
  const expiresAt = iso(l.expiresAt)!
  const payload = {
    v: 2 as const,
    kind: 'relay' as const,
    id: l.licenseId,
    relay_id: l.relayId,
    account_id: l.accountId,
    key_id: l.keyId,
    product_id: l.productId,
    plan: l.plan,
    entitlements: l.entitlements,
    seats: l.seats,
    lease_seconds: l.leaseSeconds,
    relay_public_key: l.publicKey,
    device_fingerprint: l.fingerprint,
    key_expires_at: iso(l.keyExpiresAt),
    issued_at: issuedAt,
    expires_at: expiresAt,
    kid: signer.kid,
  }
  const certificate = makeRelayCertificate(signer.privateKey, {
    public_key: l.publicKey,
    account_id: l.accountId,
    created_at: issuedAt,
    scope: { relay_id: l.relayId, key_id: l.keyId, seats: l.seats, expires_at: expiresAt },
  })
  return signLicense(signer.privateKey, signer.kid, payload, signer.certificate, certificate)
}

/**
 * POST /v1/keys/:id/relays: the relay takes `seats` of the key (exact across nodes: the key's row lock)
 * and gets its license. The same request again (the same relay key for this key, not deleted) keeps
 * its relay_id and takes this call's terms. `created` false: that repeat (200).
 */
export async function createRelay(
  deps: Deps,
  signers: Signers,
  who: Principal,
  keyId: string,
  body: CreateRelayBody,
): Promise<CreatedRelay & { created: boolean }> {
  if (!isId('key', keyId)) throw notFound('key', keyId)
  const request = readRequest(body.request)
  const publicKey = request.publicKey.toString('base64')
  const leaseSeconds = body.lease_seconds ?? DEFAULT_LEASE_SECONDS
  const ttlSeconds = body.ttl_seconds ?? DEFAULT_RELAY_TTL_SECONDS
  // Loaded (or created) before the transaction: no key generation under a row lock.
  const signer = await signers.current(who.accountId)
  const claim = await claimRelaySeats(
    deps,
    who.accountId,
    keyId,
    body.seats,
    async (tx, key) => {
      if (body.seats > key.activation_limit) {
        throw invalid('body.seats', `must be at most the key's activation_limit (${key.activation_limit})`)
      }
      return repo.liveRelayOf(tx, keyId, publicKey)
    },
    async (tx, key, existing) => {
      const issuedAt = new Date()
      const expiresAt = licenseExpiry(issuedAt, ttlSeconds, {
        expiresAt: key.expires_at,
        graceSeconds: key.grace_seconds,
        keep: key.after_expiry === 'keep',
      })
      const terms = { name: request.name, fingerprint: request.fingerprint, components: { ...request.components }, seats: body.seats, leaseSeconds, ttlSeconds, issuedAt, expiresAt }
      let relay: Relay
      if (existing !== null) relay = await repo.updateRelay(tx, existing, terms)
      else {
        relay = await repo.insertRelay(tx, {
          ...terms,
          id: newId('rly'),
          accountId: who.accountId,
          keyId,
          productId: key.product_id,
          publicKey,
          licenseId: newId('lic'),
        })
        await emit(tx, who.accountId, 'relay.created', { relay, key_id: keyId, product_id: key.product_id }, byApiKey(who))
      }
      const license = relayLicense(signer, {
        accountId: who.accountId,
        relayId: relay.id,
        licenseId: relay.license_id,
        keyId,
        productId: key.product_id,
        plan: key.plan,
        entitlements: key.entitlements,
        seats: relay.seats,
        leaseSeconds: relay.lease_seconds,
        publicKey,
        fingerprint: relay.device_fingerprint,
        keyExpiresAt: key.expires_at,
        issuedAt,
        expiresAt,
      })
      return { relay_id: relay.id, relay_license: license, created: existing === null }
    },
  )
  if (isKeyRefused(claim)) throw keyRefusal(keyId, claim.kind)
  switch (claim.kind) {
    case 'limit':
      throw new AppError('activation_limit', `Key ${keyId} has ${claim.free} free seats of ${claim.key.activation_limit}; the relay asks for ${body.seats}`)
    default:
      return claim.extra
  }
}

/** Whether the account has this key (404 otherwise). */
async function ownKey(deps: Deps, who: Principal, keyId: string): Promise<void> {
  const rows = isId('key', keyId) ? await deps.sql`select 1 from license_keys where id = ${keyId} and account_id = ${who.accountId}` : []
  if (rows.length === 0) throw notFound('key', keyId)
}

export async function listRelays(deps: Deps, who: Principal, keyId: string): Promise<{ data: Relay[] }> {
  await ownKey(deps, who, keyId)
  return { data: await repo.listRelays(deps.sql, keyId) }
}

/** DELETE /v1/relays/:id: the relay is deleted and its seats go back to the key, in force on every node on return. */
export async function deleteRelay(deps: Deps, who: Principal, relayId: string): Promise<void> {
  if (!isId('rly', relayId)) throw notFound('relay', relayId)
  const keyId = await repo.relayKey(deps.sql, who.accountId, relayId)
  if (keyId === null) throw notFound('relay', relayId)
  const deleted = await releaseRelaySeats(deps, who.accountId, keyId, async (tx, key) => {
    const relay = await repo.deleteRelay(tx, keyId, relayId)
    if (relay) await emit(tx, who.accountId, 'relay.deleted', { relay, key_id: keyId, product_id: key.product_id }, byApiKey(who))
    return relay
  })
  if (deleted === null) throw notFound('relay', relayId) // deleted meanwhile by another call
}

/** A check-in is refused with one answer, whatever is wrong with it (docs/api.md, "Check-in"). */
const notGenuine = () => new AppError('unauthorized', 'Not a genuine check-in of this relay (Keyward-Relay-Signature)')
/** How far a check-in's t may be from this server's clock. */
export const CHECK_IN_WINDOW_MS = 5 * 60_000
export const CHECK_IN_CONTEXT = 'keyward-relay-checkin/v1'
const SIGNATURE_HEADER = /^\s*t=(\d{1,15})\s*,\s*sig=([A-Za-z0-9+/]{86}==)\s*$/

/**
 * POST /v1/relays/:id/check-in: the address's rate limit, then the signature over the body's SHA-256
 * (before the body is parsed), the relay's rate limit, then the body; the answer is the key's state now, with a renewed license while it
 * is valid. Refused check-ins change nothing.
 */
export async function checkIn(
  deps: Deps,
  signers: Signers,
  relayId: string,
  bytes: Uint8Array,
  signature: string | null,
  address: string | null,
): Promise<CheckInAnswer> {
  const now = Date.now()
  const gate = checkInGateOf(deps)
  gate.admitAddress(address, now)
  const header = signature === null ? null : SIGNATURE_HEADER.exec(signature)
  if (!isId('rly', relayId) || header === null) throw notGenuine()
  const t = Number(header[1])
  if (Math.abs(now - t) > CHECK_IN_WINDOW_MS) throw notGenuine()
  const state = await repo.checkInState(deps.sql, relayId)
  const key = state === null ? null : publicKeyOf(state.public_key)
  if (state === null || key === null) throw notGenuine()
  const digest = createHash('sha256').update(bytes).digest('hex')
  const signed = Buffer.from(`${CHECK_IN_CONTEXT}\n${header[1]}\n${digest}`, 'utf8')
  if (!verify(null, signed, key, Buffer.from(header[2]!, 'base64'))) throw notGenuine()
  gate.admitRelay(relayId, now)

  const body = parseJson(bytes)
  if (!Value.Check(CheckInBody, body)) {
    const first = Value.Errors(CheckInBody, body).First()
    throw invalid(['body', ...(first?.path ?? '').split('/').filter(Boolean)].join('.'), first?.message ?? 'is invalid')
  }
  if (body.relay_id !== relayId || body.license_id !== state.license_id || body.t !== t) throw notGenuine()

  let answer: CheckInAnswer
  let renewed: { issuedAt: Date; expiresAt: Date } | null = null
  if (state.deleted) answer = { status: 'deleted' }
  else if (state.key_status === 'revoked') answer = { status: 'revoked' }
  else if (state.key_status === 'suspended') answer = { status: 'suspended' }
  else if (state.expiry_refused) answer = { status: 'expired' }
  else {
    const issuedAt = new Date(now)
    const expiresAt = licenseExpiry(issuedAt, state.ttl_seconds, {
      expiresAt: state.key_expires_at,
      graceSeconds: state.grace_seconds,
      keep: state.after_expiry === 'keep',
    })
    const signer = await signers.current(state.account_id)
    const license = relayLicense(signer, {
      accountId: state.account_id,
      relayId,
      licenseId: state.license_id,
      keyId: state.key_id,
      productId: state.product_id,
      plan: state.plan,
      entitlements: state.entitlements,
      seats: state.seats,
      leaseSeconds: state.lease_seconds,
      publicKey: state.public_key,
      fingerprint: state.device_fingerprint,
      keyExpiresAt: state.key_expires_at,
      issuedAt,
      expiresAt,
    })
    renewed = { issuedAt, expiresAt }
    answer = { status: 'valid', license }
  }
  await repo.recordCheckIn(deps.sql, { id: relayId, at: new Date(now), leases: body.leases.length, peak: body.peak, renewed })
  return answer
}

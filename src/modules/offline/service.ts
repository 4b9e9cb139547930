// Offline licenses: issuing (the device takes a seat, exactly as in validate) and sync
// (judging licenses a device brings back, renewing the good ones).
import { Value } from '@sinclair/typebox/value'
import type { Deps } from '../../deps'
import { AppError, invalid, notFound } from '../../core/errors'
import { parseComponents, type ComponentMatch, type Components } from '../../core/component-match'
import type { RecordCreated } from '../../infra/record-created'
import { iso } from '../../core/values'
import { isId, newId } from '../../infra/crypto'
import { claimSeat, isKeyRefused, keyRefusal } from '../activations/service'
import { byApiKey } from '../events/outbox'
import type { Principal } from '../../core/principal'
import { parseLicense, signLicense, verifyLicense, type LicensePayload } from './license'
import {
  DEFAULT_TTL_SECONDS,
  LicensePayload as LicensePayloadSchema,
  type IssuedLicense,
  type IssueLicenseBody,
  type SyncResult,
} from './model'
import * as repo from './repo'
import type { AccountSigners, Signers } from '../signing/signers'

export async function publicKey(signers: Signers, accountId: string) {
  const s = await signers.root(accountId)
  return { kid: s.kid, algorithm: 'ed25519' as const, public_key_pem: s.publicKeyPem, public_key: s.publicKeyRaw }
}

/**
 * A license never outlives its key's validity: the earlier of now + ttl and the key's expiry plus its
 * grace (a key kept after expiry, after_expiry keep, bounds it by the ttl only).
 */
export function licenseExpiry(issuedAt: Date, ttlSeconds: number, key: { expiresAt: Date | null; graceSeconds: number; keep: boolean }): Date {
  const byTtl = issuedAt.getTime() + ttlSeconds * 1000
  if (key.expiresAt === null || key.keep) return new Date(byTtl)
  return new Date(Math.min(byTtl, key.expiresAt.getTime() + key.graceSeconds * 1000))
}

/** What a license states of its key (a seat's key row, or a renewal's stored state, in this shape). */
export interface LicensedKey {
  id: string
  product_id: string
  plan: string | null
  entitlements: LicensePayload['entitlements']
  expires_at: Date | null
  grace_seconds: number
  after_expiry: 'refuse' | 'keep'
  component_match: ComponentMatch
}

/**
 * A license's payload for `key` on a device, issued at `issuedAt` for `ttlSeconds` (ending no later than
 * the key's own expiry and grace, unless the key is kept after expiry), signed by `kid`.
 */
export function licensePayload(
  key: LicensedKey,
  l: { id: string; accountId: string; fingerprint: string; components: Components | null; kid: string; issuedAt: Date; ttlSeconds: number },
): LicensePayload & { v: 2; kid: string; components: Components | null; component_match: ComponentMatch } {
  const expiresAt = licenseExpiry(l.issuedAt, l.ttlSeconds, { expiresAt: key.expires_at, graceSeconds: key.grace_seconds, keep: key.after_expiry === 'keep' })
  return {
    v: 2,
    id: l.id,
    account_id: l.accountId,
    key_id: key.id,
    product_id: key.product_id,
    plan: key.plan,
    device_fingerprint: l.fingerprint,
    issued_at: iso(l.issuedAt)!,
    expires_at: iso(expiresAt)!,
    entitlements: key.entitlements,
    kid: l.kid,
    components: l.components,
    component_match: key.component_match,
  }
}

export async function issueLicense(
  deps: Deps,
  signers: Signers,
  who: Principal,
  keyId: string,
  input: IssueLicenseBody,
  record?: RecordCreated,
): Promise<IssuedLicense> {
  if (!isId('key', keyId)) throw notFound('key', keyId)
  const fingerprint = input.device_fingerprint.toLowerCase()
  const parsed = parseComponents(input.components)
  if (!parsed.ok) throw invalid(`body.${parsed.field}`, parsed.detail)
  const ttlSeconds = input.ttl_seconds ?? DEFAULT_TTL_SECONDS
  // Loaded (or created) before the transaction: key generation has no business holding a row lock.
  const signer = await signers.current(who.accountId)
  // Offline devices are not the caller (the vendor's backend is), so no country or app version.
  const device = { fingerprint, appVersion: null, country: null, components: parsed.components }
  const claim = await claimSeat(deps, who.accountId, { id: keyId }, device, byApiKey(who), async (tx, key, seat) => {
    const issuedAt = new Date()
    const id = newId('lic')
    const payload = licensePayload(key, { id, accountId: who.accountId, fingerprint, components: seat.activation.components, kid: signer.kid, issuedAt, ttlSeconds })
    await repo.insertLicense(tx, {
      id,
      accountId: who.accountId,
      keyId,
      activationId: seat.activation.id,
      fingerprint,
      ttlSeconds,
      issuedAt,
      expiresAt: new Date(payload.expires_at),
    })
    // Signed here so the Idempotency-Key `record` stores the response in this transaction (signing is CPU only).
    const signed: IssuedLicense = { id, license: signLicense(signer.privateKey, signer.kid, payload, signer.certificate), expires_at: payload.expires_at, payload }
    return record ? await record(tx, signed) : signed
  })
  // A new device's seat is announced to every node by claimSeat, as validate's are.
  if (isKeyRefused(claim)) throw keyRefusal(keyId, claim.kind)
  switch (claim.kind) {
    case 'limit':
      throw new AppError('activation_limit', `All ${claim.key.activation_limit} seats of key ${keyId} are taken`)
    case 'device_used':
      throw new AppError('device_already_used', `This device already used another key of policy ${claim.key.policy_id} (one key per device)`)
    case 'mismatch':
      throw new AppError('device_mismatch', `Key ${keyId} checks machine identity (component_match ${claim.key.component_match}): this device's components do not match, none were sent, or its fingerprint was replaced`)
    default:
      return claim.extra
  }
}

type Checked = { id: string | null; payload: LicensePayload | null }

/**
 * Only a license signed by one of this account's keys (its root, or a signing key in any state: one
 * signed by a revoked key is renewed by the current signer), for this account, is trusted; anything
 * else is invalid. A v2 payload names its signer inside the signed bytes: it must be the envelope's.
 */
function check(text: string, held: AccountSigners, accountId: string): Checked {
  const parsed = parseLicense(text)
  const claimed = (parsed?.payload as { id?: unknown } | null)?.id
  const id = typeof claimed === 'string' && isId('lic', claimed) ? claimed : null
  const key = parsed ? held.publicKeys.get(parsed.kid) : undefined
  if (!parsed || key === undefined || !verifyLicense(key.publicKey, parsed)) return { id, payload: null }
  // A relay license (kind "relay", docs/api.md "The relay license") is not a device's license.
  if (!Value.Check(LicensePayloadSchema, parsed.payload) || 'kind' in (parsed.payload as object)) return { id, payload: null }
  const payload = parsed.payload as LicensePayload
  if (payload.v === 2 ? payload.kid !== parsed.kid : payload.kid !== undefined || parsed.kid !== held.root.kid) return { id, payload: null }
  return { id, payload: payload.account_id === accountId ? payload : null }
}

/**
 * Judges each license now, in the order given. The license's own expiry does not matter: a device
 * that comes back while its key is active and it still holds its seat gets a renewed license (same
 * id and ttl). Otherwise: revoked, expired (the key), deactivated (the device lost its seat), or
 * invalid (unreadable, tampered, another account's, or unknown).
 */
export async function syncLicenses(deps: Deps, signers: Signers, who: Principal, texts: string[]) {
  const held = await signers.account(who.accountId)
  const signer = await signers.current(who.accountId)
  const checked = texts.map((text) => check(text, held, who.accountId))
  const ids = [...new Set(checked.flatMap((c) => (c.payload ? [c.payload.id] : [])))]
  const states = new Map((await repo.licenseStates(deps.sql, who.accountId, ids)).map((s) => [s.id, s]))

  const issuedAt = new Date()
  const renewed = new Map<string, { license: string; activationId: string; expiresAt: Date }>()
  const results: SyncResult[] = checked.map(({ id, payload }) => {
    const state = payload ? states.get(payload.id) : undefined
    if (!state) return { id, status: 'invalid' }
    if (state.key_status === 'revoked') return { id, status: 'revoked' }
    if (state.key_status === 'suspended') return { id, status: 'suspended' }
    if (state.expiry_refused) return { id, status: 'expired' }
    if (!state.active_activation_id) return { id, status: 'deactivated' }
    let renewal = renewed.get(state.id)
    if (!renewal) {
      const next = licensePayload(
        { id: state.key_id, product_id: state.product_id, plan: state.plan, entitlements: state.entitlements, expires_at: state.key_expires_at,
          grace_seconds: state.grace_seconds, after_expiry: state.after_expiry, component_match: state.component_match },
        { id: state.id, accountId: who.accountId, fingerprint: state.device_fingerprint, components: state.active_components, kid: signer.kid, issuedAt, ttlSeconds: state.ttl_seconds },
      )
      const expiresAt = new Date(next.expires_at)
      renewal = { license: signLicense(signer.privateKey, signer.kid, next, signer.certificate), activationId: state.active_activation_id, expiresAt }
      renewed.set(state.id, renewal)
    }
    return { id, status: 'valid', license: renewal.license }
  })

  if (renewed.size > 0) {
    await deps.sql.begin(async (tx) => {
      for (const [id, r] of renewed) await repo.renewLicense(tx, { id, activationId: r.activationId, issuedAt, expiresAt: r.expiresAt })
    })
  }
  return { results }
}

// Offline licenses: issuing (the device takes an activation slot, exactly as in validate) and sync
// (judging licenses a device brings back, renewing the good ones).
import { Value } from '@sinclair/typebox/value'
import type { Deps } from '../../deps'
import { AppError, notFound } from '../../core/errors'
import type { RecordCreated } from '../../core/record-created'
import { iso } from '../../core/values'
import { isId, newId } from '../../infra/crypto'
import { claimSlot, lockKeyForSlot } from '../activations/repo'
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
import type { Signer, Signers } from './signing-keys'

export async function publicKey(signers: Signers, accountId: string) {
  const s = await signers.get(accountId)
  return { kid: s.kid, algorithm: 'ed25519' as const, public_key_pem: s.publicKeyPem, public_key: s.publicKeyRaw }
}

/** A license never outlives its key: the earlier of now + ttl and the key's own expiry. */
function licenseExpiry(issuedAt: Date, ttlSeconds: number, keyExpiresAt: Date | null): Date {
  const byTtl = issuedAt.getTime() + ttlSeconds * 1000
  return new Date(keyExpiresAt ? Math.min(byTtl, keyExpiresAt.getTime()) : byTtl)
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
  const ttlSeconds = input.ttl_seconds ?? DEFAULT_TTL_SECONDS
  // Loaded (or created) before the transaction: key generation has no business holding a row lock.
  const signer = await signers.get(who.accountId)
  const { issued, keyHash, newDevice } = await deps.sql.begin(async (tx) => {
    const key = await lockKeyForSlot(tx, who.accountId, { id: keyId })
    if (!key) throw notFound('key', keyId)
    if (key.status === 'revoked') throw new AppError('key_revoked', `Key ${keyId} is revoked`)
    if (key.expired) throw new AppError('key_expired', `Key ${keyId} has expired`)
    // Offline devices are not the caller (the vendor's backend is), so no country or app version.
    const slot = await claimSlot(tx, key, { fingerprint, appVersion: null, country: null }, byApiKey(who))
    if (slot.kind === 'limit') {
      throw new AppError('activation_limit', `All ${key.activation_limit} activation slots of key ${keyId} are taken`)
    }
    const issuedAt = new Date()
    const expiresAt = licenseExpiry(issuedAt, ttlSeconds, key.expires_at)
    const id = newId('lic')
    await repo.insertLicense(tx, {
      id,
      accountId: who.accountId,
      keyId,
      activationId: slot.activation.id,
      fingerprint,
      ttlSeconds,
      issuedAt,
      expiresAt,
    })
    const payload: LicensePayload = {
      v: 1,
      id,
      account_id: who.accountId,
      key_id: keyId,
      product_id: key.product_id,
      plan: key.plan,
      device_fingerprint: fingerprint,
      issued_at: iso(issuedAt)!,
      expires_at: iso(expiresAt)!,
    }
    // Signed here so the Idempotency-Key `record` stores the response in this transaction (signing is CPU only).
    const signed: IssuedLicense = { id, license: signLicense(signer.privateKey, signer.kid, payload), expires_at: payload.expires_at, payload }
    const issued = record ? await record(tx, signed) : signed
    return { issued, keyHash: key.key_hash, newDevice: slot.kind === 'created' ? slot.activation.id : null }
  })
  // A new device took a slot: every node's validate state learns it (as validate itself announces new
  // devices). The activation is committed either way, so a failed broadcast is logged, not an error.
  if (newDevice) {
    await deps.bus
      .publish({ kind: 'device', accountId: who.accountId, keyHash, fingerprint, activationId: newDevice })
      .catch((err) => deps.log.warn({ err: String(err) }, 'device broadcast failed'))
  }
  return issued
}

type Checked = { id: string | null; payload: LicensePayload | null }

/** Only a license signed by this account's key, for this account, is trusted; anything else is invalid. */
function check(text: string, signer: Signer, accountId: string): Checked {
  const parsed = parseLicense(text)
  const claimed = (parsed?.payload as { id?: unknown } | null)?.id
  const id = typeof claimed === 'string' && isId('lic', claimed) ? claimed : null
  if (!parsed || parsed.kid !== signer.kid || !verifyLicense(signer.publicKey, parsed)) return { id, payload: null }
  if (!Value.Check(LicensePayloadSchema, parsed.payload)) return { id, payload: null }
  const payload = parsed.payload as LicensePayload
  return { id, payload: payload.account_id === accountId ? payload : null }
}

/**
 * Judges each license now, in the order given. The license's own expiry does not matter: a device
 * that comes back while its key is active and it still holds its slot gets a renewed license (same
 * id and ttl). Otherwise: revoked, expired (the key), deactivated (the device lost its slot), or
 * invalid (unreadable, tampered, another account's, or unknown).
 */
export async function syncLicenses(deps: Deps, signers: Signers, who: Principal, texts: string[]) {
  const signer = await signers.get(who.accountId)
  const checked = texts.map((text) => check(text, signer, who.accountId))
  const ids = [...new Set(checked.flatMap((c) => (c.payload ? [c.payload.id] : [])))]
  const states = new Map((await repo.licenseStates(deps.sql, who.accountId, ids)).map((s) => [s.id, s]))

  const issuedAt = new Date()
  const renewed = new Map<string, { license: string; activationId: string; expiresAt: Date }>()
  const results: SyncResult[] = checked.map(({ id, payload }) => {
    const state = payload ? states.get(payload.id) : undefined
    if (!state) return { id, status: 'invalid' }
    if (state.key_status === 'revoked') return { id, status: 'revoked' }
    if (state.key_status === 'expired') return { id, status: 'expired' }
    if (!state.active_activation_id) return { id, status: 'deactivated' }
    let renewal = renewed.get(state.id)
    if (!renewal) {
      const expiresAt = licenseExpiry(issuedAt, state.ttl_seconds, state.key_expires_at)
      const next: LicensePayload = {
        v: 1,
        id: state.id,
        account_id: who.accountId,
        key_id: state.key_id,
        product_id: state.product_id,
        plan: state.plan,
        device_fingerprint: state.device_fingerprint,
        issued_at: iso(issuedAt)!,
        expires_at: iso(expiresAt)!,
      }
      renewal = { license: signLicense(signer.privateKey, signer.kid, next), activationId: state.active_activation_id, expiresAt }
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

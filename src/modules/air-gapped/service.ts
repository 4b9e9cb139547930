// Air-gapped activation and deactivation (docs/integrating.md, "Customers without a network"; docs/api.md,
// "Air-gapped activation"). A request code takes a seat exactly as validate would give one (the seats
// room's claim, under the key row lock) and is answered by an offline license for that seat; a
// deactivation code signed by the device's key releases it as a holder release and is answered by a
// receipt signed by the account's current signer. The codes are never stored, logged or put in
// events: a request code carries the key value, so only its SHA-256 is kept (the idempotency of "the
// same code again, on any node").
import { componentsMatch, type ComponentMatch, type Components } from '../../core/component-match'
import { AppError, invalid } from '../../core/errors'
import { PLAN_LIMITS, type Plan } from '../../core/plans'
import type { Principal } from '../../core/principal'
import { iso } from '../../core/values'
import type { Deps } from '../../deps'
import { secondsToUtcMidnight } from '../../infra/counters'
import { newId } from '../../infra/crypto'
import type { Tx } from '../../infra/db'
import { claimSeatUnless, releaseActivationByHolder } from '../activations/service'
import type { SeatKey } from '../activations/repo'
import type { Actor } from '../events/outbox'
import { signLicense, type LicensePayload } from '../offline/license'
import { DEFAULT_TTL_SECONDS } from '../offline/model'
import { licensePayload } from '../offline/service'
import type { Signer, Signers } from '../signing/signers'
import { parseDeactivation, parseRequest, responseCode, sha256Of, signReceipt, verifyDeactivation, type OfflineRequest } from './codes'
import type {
  OfflineActivation,
  OfflineActivationBody,
  OfflineDeactivation,
  OfflineRefusal,
  OfflineRefusalReason,
} from './model'

/** How a door finds the key a request names (the validation engine's holder lookup: hot state, imported keys). */
export interface KeyFinder {
  holderKey(who: Pick<Principal, 'accountId'>, key: string, productId: string | null): Promise<string | null>
}

/** Who the call is for: the caller's account (an API key), or the product's account (the portal). */
export interface Door {
  accountId: string
  plan: Plan
  /** The portal's product: only its keys are accepted, and an unknown key is 404 instead of a refusal. */
  productId: string | null
}

/** The payload of an air-gapped activation's license: an offline license's, and what the device checks. */
export interface OfflineLicensePayload extends LicensePayload {
  activation_id: string
  device_public_key: string
  request_nonce: string
  components: Components | null
  component_match: ComponentMatch
}

export type ActivateResult =
  | { status: 201 | 200; body: OfflineActivation }
  | { status: 200; body: OfflineRefusal }

const offlineActor = (activationId: string): Actor => ({ type: 'offline', id: activationId })
const refused = (reason: OfflineRefusalReason): ActivateResult => ({ status: 200, body: { valid: false, reason } })
export const portalNotFound = () => new AppError('not_found', 'Not found')
export const invalidDeactivation = () =>
  new AppError('invalid_deactivation', 'This is not a deactivation code of a live activation', {
    errors: [{ field: 'code', message: 'is not a deactivation code of a live activation' }],
  })

/** Counts the call in the account's daily quota (the validate limit); 429 past it. */
async function countCall(deps: Deps, door: Door): Promise<void> {
  const limit = PLAN_LIMITS[door.plan]?.validationsPerDay ?? null
  const taken = deps.counters.take(door.accountId, limit)
  if (taken === true || (taken !== false && (await taken))) return
  throw new AppError('rate_limited', `This account's daily limit of ${limit} validate calls is reached`, { retryAfter: secondsToUtcMidnight() })
}

/**
 * The machine-identity rule's refusals (docs/integrating.md, "Identifying machines"): with the rule on,
 * a request without components, or whose fingerprint holds a seat with components that do not match,
 * or that an active activation of the key replaced, is `device_mismatch`. A new fingerprint whose
 * components match another seat's takes a seat of its own here (no rebind: docs/decisions.md).
 */
async function mismatched(tx: Tx, key: SeatKey, rule: ComponentMatch, req: OfflineRequest): Promise<boolean> {
  if (rule === 'off') return false
  if (req.components === null) return true
  const active = await tx<{ device_fingerprint: string; components: Components | null; replaced_fingerprints: string[] }[]>`
    select device_fingerprint, components, replaced_fingerprints from activations where key_id = ${key.id} and status = 'active'`
  const mine = active.find((a) => a.device_fingerprint === req.device_fingerprint)
  if (mine) return mine.components !== null && !componentsMatch(rule, mine.components, req.components)
  return active.some((a) => a.replaced_fingerprints.includes(req.device_fingerprint))
}

interface Issue {
  licenseId: string
  activationId: string
  ttlSeconds: number
  issuedAt: Date
  rule: ComponentMatch
  components: Components | null
}

/** The response code for a seat: the offline license of `issue`, signed now by the current signer. */
function response(signer: Signer, accountId: string, key: SeatKey, req: OfflineRequest, issue: Issue): { text: string; expiresAt: Date } {
  const payload: OfflineLicensePayload = {
    ...licensePayload(
      { ...key, component_match: issue.rule },
      { id: issue.licenseId, accountId, fingerprint: req.device_fingerprint, components: issue.components, kid: signer.kid, issuedAt: issue.issuedAt, ttlSeconds: issue.ttlSeconds },
    ),
    activation_id: issue.activationId,
    device_public_key: req.device_public_key,
    request_nonce: req.nonce,
  }
  const expiresAt = new Date(payload.expires_at)
  return { text: responseCode(signLicense(signer.privateKey, signer.kid, payload, signer.certificate)), expiresAt }
}

type Before = { kind: 'refused'; reason: OfflineRefusalReason } | { kind: 'used' } | { kind: 'again'; body: OfflineActivation }

/**
 * POST /v1/offline/activations and the portal's: decides as validate (not_found, revoked, suspended,
 * expired, the component rule, device_already_used, a free seat or activation_limit) and answers 201
 * with the seat and its response code; the same code again 200 with the same seat (a license renewed
 * under the same id); after that seat was released, 409 request_used. Spends no credits.
 */
export async function activate(deps: Deps, keys: KeyFinder, signers: Signers, door: Door, body: OfflineActivationBody): Promise<ActivateResult> {
  const parsed = parseRequest(body.request)
  if (!parsed.ok) throw invalid(parsed.field, parsed.message)
  const req = parsed.value
  await countCall(deps, door)
  const keyHash = await keys.holderKey({ accountId: door.accountId }, req.key, door.productId)
  if (keyHash === null) {
    if (door.productId !== null) throw portalNotFound()
    return refused('not_found')
  }
  const requestHash = sha256Of(body.request)
  const ttlSeconds = body.ttl_seconds ?? DEFAULT_TTL_SECONDS
  // Loaded (or created) before the transaction: key generation has no business holding a row lock.
  const signer = await signers.current(door.accountId)
  const activationId = newId('act')
  let rule: ComponentMatch = 'off'
  const device = { fingerprint: req.device_fingerprint, appVersion: null, country: null, name: req.device_name, activationId, publicKey: req.device_public_key }
  const claim = await claimSeatUnless<OfflineActivation, Before>(
    deps,
    door.accountId,
    { keyHash },
    device,
    offlineActor(activationId),
    async (tx, key) => {
      if (door.productId !== null && key.product_id !== door.productId) return { kind: 'refused', reason: 'not_found' }
      rule = key.component_match // the effective rule: the key's own, else its policy's, else off
      const [seen] = await tx<{ activation_id: string; license_id: string; ttl_seconds: number; status: string; components: Components | null }[]>`
        select r.activation_id, r.license_id, l.ttl_seconds, a.status, a.components
        from offline_requests r join activations a on a.id = r.activation_id join offline_licenses l on l.id = r.license_id
        where r.request_sha256 = ${requestHash} and r.account_id = ${door.accountId} and r.key_id = ${key.id}`
      if (seen) {
        if (seen.status !== 'active') return { kind: 'used' }
        // The same code again: the same seat, its license renewed under the same id and ttl.
        const issuedAt = new Date()
        const renewed = response(signer, door.accountId, key, req, {
          licenseId: seen.license_id,
          activationId: seen.activation_id,
          ttlSeconds: seen.ttl_seconds,
          issuedAt,
          rule,
          components: req.components ?? seen.components,
        })
        await tx`update offline_licenses set issued_at = ${issuedAt}, expires_at = ${renewed.expiresAt} where id = ${seen.license_id}`
        return { kind: 'again', body: { activation_id: seen.activation_id, response: renewed.text } }
      }
      if (await mismatched(tx, key, rule, req)) return { kind: 'refused', reason: 'device_mismatch' }
      return null
    },
    async (tx, key, seat) => {
      const activation = seat.activation
      // The seat's device key is the latest request's; the components sent are stored (latest), as validate stores them.
      const sent = req.components === null ? null : tx.json(req.components as Record<string, string>)
      const [stored] = await tx<{ components: Components | null }[]>`update activations set device_public_key = ${req.device_public_key},
          device_name = coalesce(${req.device_name}, device_name),
          components_changed_at = case when ${sent}::jsonb is null or components = ${sent}::jsonb then components_changed_at else now() end,
          components = coalesce(${sent}::jsonb, components)
        where id = ${activation.id} returning components`
      const licenseId = newId('lic')
      const issuedAt = new Date()
      const issued = response(signer, door.accountId, key, req, {
        licenseId,
        activationId: activation.id,
        ttlSeconds,
        issuedAt,
        rule,
        components: stored?.components ?? req.components,
      })
      await tx`insert into offline_licenses (id, account_id, key_id, activation_id, device_fingerprint, ttl_seconds, issued_at, expires_at)
        values (${licenseId}, ${door.accountId}, ${key.id}, ${activation.id}, ${req.device_fingerprint}, ${ttlSeconds}, ${issuedAt}, ${issued.expiresAt})`
      await tx`insert into offline_requests (request_sha256, account_id, key_id, activation_id, license_id, device_public_key)
        values (${requestHash}, ${door.accountId}, ${key.id}, ${activation.id}, ${licenseId}, ${req.device_public_key})`
      return { activation_id: activation.id, response: issued.text }
    },
  )
  switch (claim.kind) {
    case 'not_found':
      if (door.productId !== null) throw portalNotFound()
      return refused('not_found')
    case 'revoked':
    case 'suspended':
    case 'expired':
      return refused(claim.kind)
    case 'limit':
      return refused('activation_limit')
    case 'device_used':
      return refused('device_already_used')
    case 'mismatch':
      return refused('device_mismatch')
    case 'answered': {
      const a = claim.answer
      if (a.kind === 'again') return { status: 200, body: a.body }
      if (a.kind === 'used') throw new AppError('request_used', 'This request code was used for a seat that has since been released; make a new request on the device')
      if (a.reason === 'not_found' && door.productId !== null) throw portalNotFound()
      return refused(a.reason)
    }
    default:
      return { status: 201, body: claim.extra }
  }
}

type Known = {
  key_id: string
  product_id: string
  activation_id: string
  device_public_key: string
  device_fingerprint: string
}

/**
 * POST /v1/offline/deactivations and the portal's: a genuine code of a live air-gapped seat (signed by
 * the key of the request that took it) releases the seat as its holder would (counted toward
 * deactivations_allowed) and is answered by a signed receipt; the same code again, the same receipt
 * (the same released_at, signed by the current signer); a seat released otherwise, released: false.
 * Anything else is 400 invalid_deactivation, all alike.
 */
export async function deactivate(deps: Deps, signers: Signers, door: Door, code: string): Promise<OfflineDeactivation> {
  const d = parseDeactivation(code)
  if (d === null) throw invalidDeactivation()
  if (door.productId !== null) await countCall(deps, door)
  const [known] = await deps.sql<Known[]>`select r.key_id, k.product_id, r.activation_id, r.device_public_key, l.device_fingerprint
    from offline_requests r join offline_licenses l on l.id = r.license_id join license_keys k on k.id = r.key_id
    where r.license_id = ${d.license_id} and r.account_id = ${door.accountId}`
  if (
    !known ||
    known.activation_id !== d.activation_id ||
    known.device_fingerprint !== d.device_fingerprint ||
    (door.productId !== null && known.product_id !== door.productId) ||
    !verifyDeactivation(known.device_public_key, d)
  ) {
    throw invalidDeactivation()
  }
  const codeHash = sha256Of(code)
  const signer = await signers.current(door.accountId)
  const receipt = (releasedAt: Date): OfflineDeactivation => ({
    released: true,
    receipt: signReceipt(signer.privateKey, signer.certificate, {
      activation_id: d.activation_id,
      license_id: d.license_id,
      released_at: iso(releasedAt)!,
      kid: signer.kid,
    }),
  })
  const result = await releaseActivationByHolder(
    deps,
    door.accountId,
    known.key_id,
    known.activation_id,
    offlineActor(known.activation_id),
    async (tx) => {
      const [row] = await tx<{ deactivation_sha256: string | null; released_at: Date | null }[]>`
        select deactivation_sha256, released_at from offline_requests where license_id = ${d.license_id}`
      if (!row || row.deactivation_sha256 === null) return null
      return row.deactivation_sha256 === codeHash ? { releasedAt: row.released_at! } : { releasedAt: null }
    },
    async (tx, released) => {
      const releasedAt = new Date(released.deactivated_at!)
      await tx`update offline_requests set deactivation_sha256 = ${codeHash}, released_at = ${releasedAt} where license_id = ${d.license_id}`
      return releasedAt
    },
  )
  if (result === null) throw invalidDeactivation() // the key is gone
  if (result.kind === 'released') return receipt(result.value)
  if (result.kind === 'answered' && result.answer.releasedAt !== null) return receipt(result.answer.releasedAt)
  return { released: false, reason: 'already_released' }
}

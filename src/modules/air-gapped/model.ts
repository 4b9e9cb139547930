import { OneOf, t } from '../../http/schema'
import { MAX_TTL_SECONDS, MIN_TTL_SECONDS } from '../offline/model'
import { MAX_DEACTIVATION, MAX_REQUEST } from './codes'

const ProductId = t.String({ maxLength: 64, description: "The product's id (prod_…)" })
export const PortalParams = t.Object({ product_id: ProductId })

export const OfflineActivationBody = t.Object({
  request: t.String({
    maxLength: MAX_REQUEST,
    description:
      'The device\'s request code: KWREQ1. + base64url (no padding) of JSON {v: 1, key, device_fingerprint, components?, device_name?, ' +
      'device_public_key (base64url of 32 bytes), nonce (16..64 of A-Z a-z 0-9 _ -), t (unix ms)}; at most 2,048 characters. ' +
      'A malformed code is 400 naming the field (request.nonce, …).',
  }),
  ttl_seconds: t.Optional(
    t.Union([
      t.Integer({ minimum: MIN_TTL_SECONDS, maximum: MAX_TTL_SECONDS, description: "The offline license's lifetime; default 30 days (as POST /v1/keys/:id/offline-licenses)" }),
      t.Null(),
    ]),
  ),
})
export type OfflineActivationBody = typeof OfflineActivationBody.static

export const OfflineActivation = t.Object({
  activation_id: t.String({ examples: ['act_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  response: t.String({
    description:
      'KWRES1. + base64url of an offline license text whose payload adds activation_id, device_public_key, request_nonce, components and component_match',
  }),
})
export type OfflineActivation = typeof OfflineActivation.static

/**
 * The refusals an air-gapped request can meet, in validate's order (a request asks for no entitlements
 * and spends no credits, so entitlements_missing and credits_exhausted never come).
 */
export const OFFLINE_REFUSALS = ['not_found', 'revoked', 'suspended', 'expired', 'device_mismatch', 'device_already_used', 'activation_limit'] as const
export type OfflineRefusalReason = (typeof OFFLINE_REFUSALS)[number]

export const OfflineRefusal = t.Object(
  { valid: t.Literal(false), reason: OneOf(OFFLINE_REFUSALS) },
  { description: 'Refused exactly as validate would refuse the device (nothing recorded)' },
)
export type OfflineRefusal = typeof OfflineRefusal.static

export const OfflineDeactivationBody = t.Object({
  code: t.String({
    maxLength: MAX_DEACTIVATION,
    description:
      "The device's deactivation code: KWDEA1. + base64url of JSON {v: 1, license_id, activation_id, device_fingerprint, t} + . + base64url of the device key's Ed25519 signature over the text before the dot",
  }),
})
export type OfflineDeactivationBody = typeof OfflineDeactivationBody.static

export const OfflineDeactivation = t.Union([
  t.Object({
    released: t.Literal(true),
    receipt: t.String({
      description:
        "KWRCP1. + base64url of JSON {activation_id, license_id, released_at, kid} + . + base64url of the current signer's signature over the text before that dot, + . + the signer's KWCERT1 certificate when it is not the root",
    }),
  }),
  t.Object({ released: t.Literal(false), reason: t.Literal('already_released') }),
])
export type OfflineDeactivation = typeof OfflineDeactivation.static

import { OneOf, t, Timestamp } from '../../http/schema'
import { ComponentsIn, StoredComponents } from '../activations/model'
import { ComponentMatch } from '../policies/model'

export const DEFAULT_TTL_SECONDS = 30 * 24 * 3600
export const MIN_TTL_SECONDS = 3600
export const MAX_TTL_SECONDS = 31_536_000

export const PublicKey = t.Object({
  kid: t.String({ description: "The root's key id (the key apps pin; it signs the certificates of the account's signing keys)" }),
  algorithm: t.Literal('ed25519'),
  public_key_pem: t.String({ description: 'SubjectPublicKeyInfo PEM, for openssl and Node crypto' }),
  public_key: t.String({ description: 'The raw 32-byte Ed25519 public key, base64 (libsodium and friends)' }),
})

export const IssueLicenseBody = t.Object({
  device_fingerprint: t.String({ pattern: '^[0-9a-fA-F]{64}$', description: '64 hex characters, case-insensitive' }),
  ttl_seconds: t.Optional(
    t.Union([
      t.Integer({ minimum: MIN_TTL_SECONDS, maximum: MAX_TTL_SECONDS, description: 'Default 30 days' }),
      t.Null(),
    ]),
  ),
  components: t.Optional(ComponentsIn),
})
export type IssueLicenseBody = typeof IssueLicenseBody.static

export const LicensePayload = t.Object({
  v: t.Union([t.Literal(1), t.Literal(2)], { description: '2 for licenses issued now (kid inside); 1 for licenses issued before signing keys' }),
  id: t.String({ pattern: '^lic_[0-9A-HJKMNP-TV-Z]{26}$' }),
  account_id: t.String(),
  key_id: t.String(),
  product_id: t.String(),
  plan: t.Union([t.String(), t.Null()]),
  device_fingerprint: t.String(),
  issued_at: Timestamp,
  expires_at: Timestamp,
  entitlements: t.Optional(
    t.Record(t.String(), t.Union([t.Literal(true), t.Number(), t.String()]), {
      description: "The key's effective entitlements when the license was issued or renewed (absent in licenses issued before entitlements existed)",
    }),
  ),
  kid: t.Optional(t.String({ description: "v2: the signer's kid (the root's or a signing key's), inside the signed bytes" })),
  components: t.Optional(
    t.Union([StoredComponents], {
      description: "The device's components as stored on its activation when issued or renewed (null: none); the SDK matches the device's current ones against them",
    }),
  ),
  component_match: t.Optional(t.Union([ComponentMatch], { description: "The key's component_match rule when issued or renewed (absent in licenses issued before machine identity: off)" })),
})

export const IssuedLicense = t.Object({
  id: t.String({ examples: ['lic_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  license: t.String({ description: 'The license text (-----BEGIN KEYWARD LICENSE----- …)' }),
  expires_at: Timestamp,
  payload: LicensePayload,
})
export type IssuedLicense = typeof IssuedLicense.static

export const SyncBody = t.Object({
  licenses: t.Array(t.String(), { minItems: 1, maxItems: 100, description: 'License texts; the request body may be up to 256 KiB' }),
})

export const SYNC_STATUSES = ['valid', 'revoked', 'suspended', 'expired', 'deactivated', 'invalid'] as const
export type SyncStatus = (typeof SYNC_STATUSES)[number]

export const SyncResult = t.Object({
  id: t.Union([t.String(), t.Null()], { description: 'The license id, null when the text is not readable as a license' }),
  status: OneOf(SYNC_STATUSES),
  license: t.Optional(t.String({ description: 'Renewed license (same id and ttl), only when valid' })),
})
export type SyncResult = typeof SyncResult.static

export const SyncResponse = t.Object({
  results: t.Array(SyncResult, { description: 'One result per input license, in the same order' }),
})

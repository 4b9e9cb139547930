import { Instant, NullableTimestamp, OneOf, t, Timestamp } from '../../http/schema'
import { SIGNING_KEY_STATES } from './timeline'

/** At most this many signing keys per account that are not revoked (409 signing_key_limit). */
export const MAX_UNREVOKED_KEYS = 16

const Kid = t.String({ description: 'Key id: the first 32 hex characters of the SHA-256 of the raw public key', examples: ['3f1c9a0d5e7b2c4a8f6e1d0b9a7c5e3f'] })
const PublicKeyRaw = t.String({ description: 'The raw 32-byte Ed25519 public key, standard base64' })
const Certificate = t.String({
  description: 'KWCERT1.<base64url JSON {kid, public_key, account_id, created_at}>.<base64url root signature over the text before the last dot>',
})
const State = OneOf(SIGNING_KEY_STATES, {
  description: 'pending (created, not signing yet), active (the one that signs), retired (signed before, still verifies), revoked (verifies no more)',
})

/** A signing key as the API shows it (and as its events carry it): never the private half. */
export const SigningKey = t.Object({
  kid: Kid,
  public_key: PublicKeyRaw,
  state: State,
  certificate: Certificate,
  created_at: Timestamp,
  activate_at: t.Union([Timestamp, t.Null()], { description: 'When it becomes active by itself (scheduled on create), or null' }),
  activated_at: NullableTimestamp,
  revoked_at: NullableTimestamp,
})
export type SigningKey = typeof SigningKey.static

/** The signed key set: the root, every signing key (revoked ones too, so apps learn of revocations). */
export const KeySet = t.Object({
  root: t.Object({ kid: Kid, public_key: PublicKeyRaw }, { description: "The account's root key: the one apps pin" }),
  keys: t.Array(
    t.Object({
      kid: Kid,
      public_key: PublicKeyRaw,
      state: State,
      certificate: Certificate,
      created_at: Timestamp,
      activated_at: NullableTimestamp,
      revoked_at: NullableTimestamp,
    }),
    { description: 'Every signing key of the account, newest first' },
  ),
  issued_at: Timestamp,
  signature: t.String({
    description: 'base64url (no padding) of the root\'s Ed25519 signature over the RFC 8785 canonical JSON of this object without "signature"',
  }),
})
export type KeySet = typeof KeySet.static

export const CreateSigningKeyBody = t.Object({
  activate_at: t.Optional(t.Union([Instant('In the future: the key becomes the active one then, on every node; omit or null = pending until activated'), t.Null()])),
})
export type CreateSigningKeyBody = typeof CreateSigningKeyBody.static

export const RevokeSigningKeyBody = t.Object({
  reason: t.Optional(t.Union([t.String({ maxLength: 500, description: 'Kept with the key (not shown in its object)' }), t.Null()])),
})

export const KidParam = t.Object({ kid: t.String() })

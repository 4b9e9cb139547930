// Relays (docs/api.md, "Relays"): the relay object, the bodies and answers of its routes, and the
// request code and check-in body as the relay sends them.
import { NullableTimestamp, OneOf, PlainText, t, Timestamp } from '../../http/schema'
import { DeviceName } from '../validation/model'

export const DEFAULT_LEASE_SECONDS = 900
export const DEFAULT_RELAY_TTL_SECONDS = 30 * 24 * 3600
/** A request code longer than this is refused before it is decoded. */
export const MAX_REQUEST_CHARS = 4096
export const REQUEST_PREFIX = 'KWRLY1.'
/** Leases one check-in may list: a relay has at most a key's activation_limit (10,000) seats. */
export const MAX_CHECK_IN_LEASES = 10_000

const Fingerprint = t.String({ pattern: '^[0-9a-fA-F]{64}$', description: '64 hex characters; stored lower-case' })
const Components = t.Record(t.String(), t.String(), { description: '{name: SHA-256 hex}, 1..16, as sent in the relay request' })

export const Relay = t.Object({
  id: t.String({ examples: ['rly_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  key_id: t.String(),
  product_id: t.String(),
  name: t.String({ description: 'The name the relay gave in its request' }),
  seats: t.Integer({ description: "Seats of the key the relay holds (counted in the key's activations_used)" }),
  lease_seconds: t.Integer({ description: 'How long a floating seat lasts on the relay without a validate' }),
  ttl_seconds: t.Integer({ description: "The license's life from each issue or renewal" }),
  public_key: t.String({ description: "The relay's raw 32-byte Ed25519 public key, standard base64" }),
  device_fingerprint: t.String({ description: 'The fingerprint of the machine the relay runs on' }),
  components: Components,
  license_id: t.String({ description: 'The relay license\'s id (the same for every renewal)' }),
  issued_at: Timestamp,
  expires_at: Timestamp,
  created_at: Timestamp,
  last_check_in_at: NullableTimestamp,
  leases: t.Union([t.Integer(), t.Null()], { description: 'Leases held at the last check-in; null before the first' }),
  peak: t.Integer({ description: 'The most leases held at once that check-ins reported over the last 30 days (0 before one)' }),
})
export type Relay = typeof Relay.static

/** The key detail's view of its relays (GET /v1/keys/:id). */
export const RelaySummary = t.Object({
  id: t.String(),
  name: t.String(),
  seats: t.Integer(),
  expires_at: Timestamp,
  last_check_in_at: NullableTimestamp,
  peak: t.Integer({ description: 'The most leases held at once over the last 30 days' }),
})
export type RelaySummary = typeof RelaySummary.static

export const RelayList = t.Object({ data: t.Array(Relay, { description: 'The key\'s relays that are not deleted, oldest first' }) })

export const CreateRelayBody = t.Object({
  request: t.String({
    minLength: 1,
    maxLength: MAX_REQUEST_CHARS,
    description: 'The relay request code `keyward relay request` printed: KWRLY1. + base64url of {v: 1, relay_public_key, device_fingerprint, components, name}',
  }),
  seats: t.Integer({ minimum: 1, maximum: 10_000, description: "1..the key's activation_limit (more: 400); more than its free seats: 409 activation_limit" }),
  lease_seconds: t.Optional(t.Integer({ minimum: 60, maximum: 86_400, description: 'Default 900' })),
  ttl_seconds: t.Optional(t.Integer({ minimum: 3600, maximum: 31_536_000, description: 'Default 30 days' })),
})
export type CreateRelayBody = typeof CreateRelayBody.static

export const CreatedRelay = t.Object({
  relay_id: t.String({ examples: ['rly_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  relay_license: t.String({
    description: 'The relay license text (-----BEGIN KEYWARD LICENSE----- …), for `keyward relay load`; its envelope carries relay_certificate',
  }),
})
export type CreatedRelay = typeof CreatedRelay.static

/** What the request code holds once decoded (checked by service.ts `readRequest`, field by field). */
export interface RelayRequest {
  publicKey: Buffer
  fingerprint: string
  components: Readonly<Record<string, string>>
  name: string
}

export const RelayRequestName = PlainText(1, 200)

export const CheckInLease = t.Object({
  device_fingerprint: Fingerprint,
  device_name: t.Union([DeviceName, t.Null()]),
  since: Timestamp,
})

export const CheckInBody = t.Object({
  relay_id: t.String({ maxLength: 64 }),
  license_id: t.String({ maxLength: 64 }),
  t: t.Integer({ description: 'Unix ms: the same as the signature header\'s t' }),
  peak: t.Integer({ minimum: 0, maximum: 10_000, description: 'The most leases held at once since the last check-in' }),
  leases: t.Array(CheckInLease, { maxItems: MAX_CHECK_IN_LEASES, description: 'The leases held now' }),
})
export type CheckInBody = typeof CheckInBody.static

export const CHECK_IN_STATUSES = ['valid', 'revoked', 'suspended', 'expired', 'deleted'] as const
export type CheckInStatus = (typeof CHECK_IN_STATUSES)[number]

export const CheckInAnswer = t.Object({
  status: OneOf(CHECK_IN_STATUSES),
  license: t.Optional(t.String({ description: 'A renewed relay license, only with status valid' })),
})
export type CheckInAnswer = typeof CheckInAnswer.static

export const RelayEvent = t.Object({ relay: Relay, key_id: t.String(), product_id: t.String() })

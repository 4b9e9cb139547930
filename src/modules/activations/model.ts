import { NullableTimestamp, t, Timestamp } from '../../http/schema'

/** A device's components as stored: {name: SHA-256 hex} (docs/integrating.md, "Identifying machines"). */
export const StoredComponents = t.Union([t.Record(t.String(), t.String()), t.Null()], {
  description: 'The latest components sent for this fingerprint, {name: hash}; null when none were ever sent',
})

/**
 * Components as a device sends them: 1..16 entries, name ^[a-z][a-z0-9_.-]{0,31}$, hash 64 hex (any
 * case, stored lower). Checked by core/component-match.ts parseComponents (a 400 names the field).
 */
export const ComponentsIn = t.Union(
  [
    t.Record(t.String(), t.String(), {
      description: '{name: hash}: 1..16 entries, name ^[a-z][a-z0-9_.-]{0,31}$ (machine_id, disk, board, mac, cpu, hostname, container...), hash 64 hex characters (a salted SHA-256)',
      examples: [{ machine_id: 'a'.repeat(64), disk: 'b'.repeat(64) }],
    }),
    t.Null(),
  ],
  { description: "The device's components (machine identity); null = omitted" },
)

export const Activation = t.Object({
  id: t.String(),
  device_fingerprint: t.String(),
  device_name: t.Union([t.String(), t.Null()], { description: "The holder's label for the device, sent on validate" }),
  app_version: t.Union([t.String(), t.Null()]),
  country: t.Union([t.String(), t.Null()]),
  status: t.Union([t.Literal('active'), t.Literal('deactivated')]),
  activated_at: Timestamp,
  last_validated_at: NullableTimestamp,
  deactivated_at: NullableTimestamp,
  deactivation_reason: t.Union([t.String(), t.Null()], {
    description: 'user (POST /v1/deactivate), admin (DELETE .../activations/:id) or inactive (idle past release_after_seconds)',
  }),
  components: StoredComponents,
  components_changed_at: t.Union([t.String({ format: 'date-time' }), t.Null()], { description: 'When the stored components last changed (null: never sent)' }),
  replaced_fingerprints: t.Array(t.String(), {
    description: 'Fingerprints this activation was rebound from, newest first, at most 8: each is refused (device_mismatch) while listed',
  }),
  offline: t.Boolean({ description: 'An air-gapped seat: taken by a request code (POST /v1/offline/activations or the product\'s end-user page)' }),
})
export type Activation = typeof Activation.static

export const ActivationParams = t.Object({ id: t.String(), activation_id: t.String() })

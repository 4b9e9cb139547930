import { NullableTimestamp, t, Timestamp } from '../../http/schema'

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
  offline: t.Boolean({ description: 'An air-gapped seat: taken by a request code (POST /v1/offline/activations or the product\'s end-user page)' }),
})
export type Activation = typeof Activation.static

export const ActivationParams = t.Object({ id: t.String(), activation_id: t.String() })

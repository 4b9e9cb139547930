import { NullableTimestamp, t, Timestamp } from '../../http/schema'

export const Activation = t.Object({
  id: t.String(),
  device_fingerprint: t.String(),
  app_version: t.Union([t.String(), t.Null()]),
  country: t.Union([t.String(), t.Null()]),
  status: t.Union([t.Literal('active'), t.Literal('deactivated')]),
  activated_at: Timestamp,
  last_validated_at: NullableTimestamp,
  deactivated_at: NullableTimestamp,
  deactivation_reason: t.Union([t.String(), t.Null()]),
})
export type Activation = typeof Activation.static

import { PlainText, t, Timestamp } from '../../http/schema'
import { PolicyCredits, PolicyCreditsIn } from '../credits/model'

/** Machine identity's rule (docs/integrating.md, "Identifying machines"): how the components a device sends must match its activation's. */
export const ComponentMatch = t.Union([t.Literal('off'), t.Literal('any'), t.Literal('two'), t.Literal('most'), t.Literal('all')], {
  description:
    'off (default): components are stored, never change an answer; any / two / most / all: how many of an activation\'s stored components the ones sent must match (a new fingerprint that matches takes the activation over: a rebind)',
})

const EntitlementsOut = t.Record(t.String(), t.Union([t.Literal(true), t.Number(), t.String()]))

export const Policy = t.Object({
  id: t.String({ examples: ['pol_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  product_id: t.String({ description: 'Immutable' }),
  name: t.String(),
  plan: t.Union([t.String(), t.Null()], { description: 'The label its keys answer as plan' }),
  activation_limit: t.Integer(),
  duration: t.Union([t.String(), t.Null()], {
    description: 'ISO 8601 period added to a new key\'s created_at for its expires_at (null = perpetual); applies to keys created afterwards only',
  }),
  expiry_basis: t.Union([t.Literal('creation'), t.Literal('first_activation')], {
    description: "When a new key's duration starts: its creation, or its first activation anywhere (validate or offline license)",
  }),
  one_key_per_device: t.Boolean({ description: 'A device that ever held a key of this policy cannot activate another key of it (trials)' }),
  grace_seconds: t.Integer(),
  after_expiry: t.Union([t.Literal('refuse'), t.Literal('keep')]),
  release_after_seconds: t.Union([t.Integer(), t.Null()]),
  deactivations_allowed: t.Union([t.Integer(), t.Null()]),
  entitlements: EntitlementsOut,
  component_match: ComponentMatch,
  credits: PolicyCredits,
  metadata: t.Record(t.String(), t.Unknown()),
  keys: t.Integer({ description: 'Keys that reference it' }),
  created_at: Timestamp,
  updated_at: Timestamp,
})
export type Policy = typeof Policy.static

const Name = PlainText(1, 200, { minLength: 1, maxLength: 200, description: 'The policy\'s name: 1..200 characters, no control characters' })
const Plan = t.Union([t.String({ maxLength: 64 }), t.Null()])
const Limit = t.Integer({ minimum: 1, maximum: 10000 })
const Duration = t.Union([t.String({ maxLength: 64, description: 'ISO 8601 period, PT1M..P100Y: P1Y, P1M, P14D, PT12H, P1Y6M, ...' }), t.Null()])
const ExpiryBasis = t.Union([t.Literal('creation'), t.Literal('first_activation')])
const Grace = t.Integer({ minimum: 0, maximum: 31536000 })
const AfterExpiry = t.Union([t.Literal('refuse'), t.Literal('keep')])
const ReleaseAfter = t.Union([t.Integer({ minimum: 60, maximum: 31536000 }), t.Null()])
const DeactivationsAllowed = t.Union([t.Integer({ minimum: 0, maximum: 10000 }), t.Null()])
const Entitlements = t.Unknown({ description: 'A JSON object {code: value}, at most 64 entries (no nulls on a policy)' })
const Metadata = t.Unknown({ description: 'A JSON object, at most 8 KiB serialized' })

/** The settings a policy holds, each optional: the same fields on create and on PATCH. */
const settings = {
  plan: t.Optional(Plan),
  activation_limit: t.Optional(Limit),
  duration: t.Optional(Duration),
  expiry_basis: t.Optional(ExpiryBasis),
  one_key_per_device: t.Optional(t.Boolean()),
  grace_seconds: t.Optional(Grace),
  after_expiry: t.Optional(AfterExpiry),
  release_after_seconds: t.Optional(ReleaseAfter),
  deactivations_allowed: t.Optional(DeactivationsAllowed),
  entitlements: t.Optional(Entitlements),
  component_match: t.Optional(ComponentMatch),
  credits: t.Optional(PolicyCreditsIn),
  metadata: t.Optional(Metadata),
}

export const CreatePolicyBody = t.Object({ product_id: t.String(), name: Name, ...settings })
export type CreatePolicyBody = typeof CreatePolicyBody.static

/** Any field but product_id; omitted fields keep their value; entitlements and metadata replace the whole object. */
export const PatchPolicyBody = t.Object({
  name: t.Optional(Name),
  ...settings,
  product_id: t.Optional(t.String({ description: 'Immutable: accepted only when equal to the current product_id' })),
})
export type PatchPolicyBody = typeof PatchPolicyBody.static

export const ListPoliciesQuery = t.Object({ product_id: t.Optional(t.String({ description: 'Only this product\'s policies' })) })
export const PolicyList = t.Object({ data: t.Array(Policy) })

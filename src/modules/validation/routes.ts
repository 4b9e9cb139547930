import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import type { AnswerKeys } from '../../http/client-answers'
import { behindAuth, problems, SIGNED, withBody } from '../../http/responses'
import { fastValidate } from './fast-path'
import { DeactivateAnswer, DeactivateBody, DevicesAnswer, DevicesBody, ValidateAnswer, ValidateBody } from './model'
import type { ValidationEngine } from './service'

/** The holder routes' rate limit, as both routes document it (docs/api.md, "Holder routes' rate limit"). */
const HOLDER_RATE =
  'Rate-limited per account on each node (HOLDER_RATE_PER_SECOND, default 50 a second, bursts of HOLDER_RATE_BURST, default 200, ' +
  'shared by /v1/devices and /v1/deactivate): past it, 429 rate_limited with retry_after and Retry-After in seconds.'

export function validationRoutes(deps: Deps, engine: ValidationEngine) {
  return (
    new Elysia({ name: 'keyward.validation' })
      .use(authPlugin(deps.principals))
      // A listening node answers this route through `validationServeRoutes` (same engine, no framework
      // overhead); this declaration documents it and serves app.handle() and any path variant.
      .post('/v1/validate', ({ principal, body, request }) => engine.validate(principal, body, request.headers.get(deps.config.countryHeader)), {
        auth: 'validate',
        body: ValidateBody,
        response: { 200: ValidateAnswer, ...behindAuth(), ...withBody(), ...problems(429) },
        detail: {
          tags: ['Validation'],
          summary: 'Validate a key for a device (refusals are 200 with valid: false and a reason)',
          description:
            'Decision, first match wins: not_found, revoked, suspended, expired, entitlements_missing, known device, device_already_used, free seat (new activation), ' +
            'activation_limit, then for a metered key credits_exhausted (balance below `cost`: nothing spent, no activation recorded), else valid ' +
            '(a metered key spends `cost`, default 1). Counts toward the daily validate limit (429 past it). A new activation needs Postgres (503 while it is unreachable). ' +
            'With Keyward-Nonce the answer is signed (Keyward-Signature). CORS: callable from any origin.',
          ...SIGNED,
        },
      })
      .post('/v1/deactivate', ({ principal, body }) => engine.holders.deactivate(principal, body), {
        auth: 'validate',
        body: DeactivateBody,
        response: { 200: DeactivateAnswer, ...behindAuth(), ...withBody(), ...problems(409, 429) },
        detail: {
          tags: ['Validation'],
          summary: "Release a device's seat (reason user; emits activation.deactivated)",
          description:
            'Any device of the key may be released (list them with POST /v1/devices). Each release counts toward the ' +
            "key's deactivations_allowed: past it, 409 deactivation_limit and nothing is released. A device holding no " +
            'seat answers 200 deactivated: false, cap reached or not, and so does an unknown key. ' + HOLDER_RATE + ' With Keyward-Nonce the answer is signed ' +
            '(Keyward-Signature). CORS: callable from any origin.',
          ...SIGNED,
        },
      })
      .post('/v1/devices', ({ principal, body }) => engine.holders.devices(principal, body), {
        auth: 'validate',
        body: DevicesBody,
        response: { 200: DevicesAnswer, ...behindAuth(), ...withBody(), ...problems(404, 429) },
        detail: {
          tags: ['Validation'],
          summary: "The key's active devices, oldest first, for its holder (a manage-devices screen)",
          description:
            'An unknown key of this account, or a product_id that is not the key\'s, is 404. Not counted toward the daily validate limit. ' +
            HOLDER_RATE + ' ' +
            "A name, app version or validation time sent to another node shows once that node's batched write has run (FLUSH_INTERVAL_MS). " +
            'With Keyward-Nonce the answer is signed (Keyward-Signature). CORS: callable from any origin.',
          ...SIGNED,
        },
      })
  )
}

/** Bun.serve routes that bypass the framework for the hot route (mounted by createApp). */
export function validationServeRoutes(deps: Deps, engine: ValidationEngine, keys: AnswerKeys) {
  return { '/v1/validate': { POST: fastValidate(deps, engine, keys) } }
}

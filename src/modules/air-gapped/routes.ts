import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth, problems, withBody } from '../../http/responses'
import { t } from '../../http/schema'
import type { Signers } from '../signing/signers'
import {
  OfflineActivation,
  OfflineActivationBody,
  OfflineDeactivation,
  OfflineDeactivationBody,
  OfflineRefusal,
  PortalParams,
} from './model'
import { PortalGate, portalDoor } from './portal'
import * as service from './service'

/** 200: the same activation again, or a refusal. */
const OfflineActivationOrRefusal = t.Union([OfflineActivation, OfflineRefusal])

const ACTIVATE =
  'Decides exactly as POST /v1/validate would for the request\'s key and device (not_found, revoked, suspended, expired, device_mismatch under the ' +
  "key's component rule, device_already_used, a free seat or activation_limit; a refusal is 200 valid: false and records nothing) and answers 201 with " +
  'the seat and its response code (KWRES1: the offline license for the device). The same request code again, on any node: 200 with the same ' +
  'activation (its license renewed under the same id). Sent again after that seat was released: 409 request_used. Spends no credits; counts ' +
  'toward the daily validate limit. Events activation.created with actor {type: offline, id: <activation id>}.'
const DEACTIVATE =
  "Verifies the code with the device key of the request that took the seat and releases the seat as its holder would (counted toward the key's " +
  'deactivations_allowed: past it 409 deactivation_limit), answering a receipt (KWRCP1) signed by the current signer. The same code again: the ' +
  'same receipt (same released_at), counted once. A seat released otherwise: 200 released: false, already_released. Anything that is not a ' +
  "genuine code of a live air-gapped activation of this account: 400 invalid_deactivation, all alike. Emits activation.deactivated (actor offline)."
const PORTAL =
  ' The product\'s end-user page calls it: no Authorization (ignored if sent); the key inside the code is the credential, and only keys of the ' +
  "product are accepted. An unknown product, a product whose offline_portal is off, an unknown key and a key of another product all answer the " +
  'same 404 not_found. Limits: 60 calls a minute per client address and 20 an hour per key (429 with Retry-After); counted in the account\'s daily quota.'

export function airGappedRoutes(deps: Deps, keys: service.KeyFinder, signers: Signers) {
  return new Elysia({ name: 'keyward.air-gapped', prefix: '/v1/offline', detail: { tags: ['Air-gapped activation'] } })
    .use(authPlugin(deps.principals))
    .guard({ auth: 'validate', response: { ...behindAuth(), ...withBody() } }, (g) =>
      g
        .post(
          '/activations',
          async ({ principal, body, set }) => {
            const answer = await service.activate(deps, keys, signers, { accountId: principal.accountId, plan: principal.plan, productId: null }, body)
            set.status = answer.status
            return answer.body
          },
          {
            body: OfflineActivationBody,
            response: { 201: OfflineActivation, 200: OfflineActivationOrRefusal, ...problems(409, 429) },
            detail: { summary: "Activate an air-gapped device from its request code (the response code goes back to the device)", description: ACTIVATE },
          },
        )
        .post(
          '/deactivations',
          ({ principal, body }) =>
            service.deactivate(deps, signers, { accountId: principal.accountId, plan: principal.plan, productId: null }, body.code),
          {
            body: OfflineDeactivationBody,
            response: { 200: OfflineDeactivation, ...problems(409) },
            detail: { summary: "Release an air-gapped device's seat from its signed deactivation code (a signed receipt back)", description: DEACTIVATE },
          },
        ),
    )
}


/** The portal's two routes (the page itself is src/portal/serve.ts). */
export function portalRoutes(deps: Deps, keys: service.KeyFinder, signers: Signers, gate = new PortalGate()) {
  return new Elysia({ name: 'keyward.portal', prefix: '/portal', detail: { tags: ['Air-gapped activation'] } })
    .post(
      '/:product_id/offline/activations',
      async ({ params, body, request, server, set }) => {
        gate.admitAddress(server?.requestIP(request)?.address ?? null)
        gate.admitKey(body.request)
        const door = await portalDoor(deps.sql, params.product_id)
        const answer = await service.activate(deps, keys, signers, door, body)
        set.status = answer.status
        return answer.body
      },
      {
        params: PortalParams,
        body: OfflineActivationBody,
        response: { 201: OfflineActivation, 200: OfflineActivationOrRefusal, ...problems(400, 404, 409, 413, 429, 503) },
        detail: { summary: 'The end-user page: activate an air-gapped device (no Authorization)', description: ACTIVATE + PORTAL },
      },
    )
    .post(
      '/:product_id/offline/deactivations',
      async ({ params, body, request, server }) => {
        gate.admitAddress(server?.requestIP(request)?.address ?? null)
        gate.admitDeactivation(body.code)
        const door = await portalDoor(deps.sql, params.product_id)
        return service.deactivate(deps, signers, door, body.code)
      },
      {
        params: PortalParams,
        body: OfflineDeactivationBody,
        response: { 200: OfflineDeactivation, ...problems(400, 404, 409, 413, 429, 503) },
        detail: { summary: "The end-user page: release an air-gapped device's seat (no Authorization)", description: DEACTIVATE + PORTAL },
      },
    )
}

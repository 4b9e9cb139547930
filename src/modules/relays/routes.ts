import { Elysia } from 'elysia'
import type { Deps } from '../../deps'
import { authPlugin } from '../../http/auth'
import { behindAuth, problems, rawBody, withBody, noContent } from '../../http/responses'
import { IdParam, t } from '../../http/schema'
import type { Signers } from '../signing/signers'
import { CheckInAnswer, CheckInBody, CreatedRelay, CreateRelayBody, RelayList } from './model'
import * as service from './service'

/** The check-in's body limit; its body reaches the route as raw bytes (app.ts, kernel): the signature is over them. */
export const CHECK_IN_BODY_LIMIT = 4 * 1024 * 1024
/** The paths whose bodies arrive raw: the check-in (DELETE /v1/relays/:id has none). */
export const RELAYS_PREFIX = '/v1/relays/'

export function relayRoutes(deps: Deps, signers: Signers) {
  return new Elysia({ name: 'keyward.relays', prefix: '/v1', detail: { tags: ['Relays'] } })
    .use(authPlugin(deps.principals))
    .post(
      '/keys/:id/relays',
      async ({ principal, params, body, set }) => {
        const { created, ...answer } = await service.createRelay(deps, signers, principal, params.id, body)
        set.status = created ? 201 : 200
        return answer
      },
      {
        auth: 'offline:write',
        params: IdParam(),
        body: CreateRelayBody,
        response: { 200: CreatedRelay, 201: CreatedRelay, ...behindAuth(), ...withBody(), ...problems(404, 409) },
        detail: {
          summary: "License a relay for seats of the key (they count as the key's activations); the same request again renews",
          description:
            "201 with the relay's license; 200 for the same request again (the same relay key for this key): the same relay_id, this call's seats, lease and ttl, a renewed license. " +
            "400 for a bad request code (naming the field) or seats over the key's activation_limit; 409 activation_limit past the free seats, key_revoked, key_suspended or key_expired.",
        },
      },
    )
    .get('/keys/:id/relays', async ({ principal, params }) => service.listRelays(deps, principal, params.id), {
      auth: 'keys:read',
      params: IdParam(),
      response: { 200: RelayList, ...behindAuth(), ...problems(404) },
      detail: { summary: "The key's relays (not deleted), oldest first, with their last check-in and peak use" },
    })
    .delete(
      '/relays/:id',
      ({ principal, params, set }) => noContent(set, service.deleteRelay(deps, principal, params.id)),
      {
        auth: 'offline:write',
        params: IdParam(),
        response: { 204: t.Void(), ...behindAuth(), ...problems(404) },
        detail: { summary: 'Delete a relay: its seats return to the key at once (the relay learns it at its next check-in)' },
      },
    )
}

/** `POST /v1/relays/:id/check-in`: no Authorization; the relay's signature over the body is the credential. */
export function relayCheckInRoutes(deps: Deps, signers: Signers) {
  return new Elysia({ name: 'keyward.relays.check-in', detail: { tags: ['Relays'] } }).post(
    '/v1/relays/:id/check-in',
    ({ params, body, request, server }) =>
      service.checkIn(
        deps,
        signers,
        params.id,
        body as Uint8Array,
        request.headers.get('keyward-relay-signature'),
        server?.requestIP(request)?.address ?? null,
      ),
    {
      params: IdParam(),
      response: { 200: CheckInAnswer, ...problems(400, 401, 413, 429, 503) },
      detail: {
        summary: "A relay's check-in: its usage in, the key's state and a renewed license out",
        description:
          'No Authorization: the body (JSON, up to 4 MiB) is signed by the relay key (Keyward-Relay-Signature). 401 for a missing or bad signature, a t more than 5 minutes off, an unknown relay, ' +
          "or a body whose relay_id, license_id or t is not the relay's; 400 for a signed body of the wrong shape; 429 past 50 calls a second from one address (burst 200, before any other work) or 2 genuine check-ins a second of one relay (burst 10), per node.",
        ...rawBody(CheckInBody, [
          {
            name: 'Keyward-Relay-Signature',
            description:
              't=<unix ms>, sig=<base64 Ed25519 signature by the relay key over "keyward-relay-checkin/v1\\n" + t + "\\n" + lowercase hex SHA-256 of the exact body bytes>',
          },
        ]),
      },
    },
  )
}

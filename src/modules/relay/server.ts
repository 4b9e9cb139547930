// `keyward relay serve`: the relay's HTTP doors. The holder routes are Keyward's own (the same paths,
// bodies, checks, problems and signed answers: http/kernel.ts and http/client-answers.ts, called in the
// validate fast path's order), answered from the lease pool (pool.ts) instead of the validate engine.
// No Authorization is read: a relay has no accounts or tokens, the key value is the credential on its
// network. Answers are signed by the relay's key (kid = relay_id) with Keyward-Certificate carrying the
// chain: the relay's KWCERT1, then the signer's when the signer is not the root.
// The page (`/`) and its calls (`/relay/api/*`) take the admin token.
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import { ValidationError } from 'elysia'
import { createHash, timingSafeEqual } from 'node:crypto'
import { AppError, invalid } from '../../core/errors'
import {
  CERTIFICATE_HEADER,
  CORS_HEADERS,
  nonceOf,
  preflightHeaders,
  requestDigestOf,
  SIGNATURE_HEADER,
  signatureOf,
  type AnswerKey,
} from '../../http/client-answers'
import { problemResponse } from '../../http/errors'
import { BODY_LIMIT, checkDeclaredLength, checkQuery, parseJson, readBody, requestIdOf, toAppError } from '../../http/kernel'
import type { Logger } from '../../infra/log'
import { DeactivateBody, DevicesBody, ValidateBody } from '../validation/model'
import page from './page/index.html'
import type { LeasePool } from './pool'
import type { RelayKeyPair } from './store'
import type { RelayLicense } from './text'
import { RelayLicenseError } from './text'

const JSON_TYPE = 'application/json;charset=utf-8'
const CORS = CORS_HEADERS as Record<string, string>

export interface RelayServerDeps {
  pool: LeasePool
  keyPair: RelayKeyPair
  log: Logger
  /** sha256 hex of the admin token */
  adminTokenHash: string
  /** The request code of this relay (shown on the page for a renewal). */
  requestCode: string
  /** Verifies and installs a license pasted on the page; throws RelayLicenseError. */
  load: (text: string, key: string | undefined) => RelayLicense
  /** Checks in now (the page's button); null when no upstream is set. */
  checkInNow: (() => Promise<unknown>) | null
  upstreamUrl: string | null
}

type Handle<B> = (body: B) => unknown

/** The answer key of the installed license: the relay's key under its relay_id, with its chain. */
function answerKeyOf(d: RelayServerDeps): AnswerKey | null {
  const l = d.pool.license
  return l === null ? null : { kid: l.payload.relay_id, privateKey: d.keyPair.privateKey, certificate: l.chain }
}

/**
 * One holder route: nonce (400) → content-length limit → query → request id → JSON (400/413) → schema
 * (400) → the pool → answer, signed when a nonce was sent (problems too, as Keyward signs them).
 */
function holderRoute<B>(d: RelayServerDeps, path: string, check: TypeCheck<any>, handle: Handle<B>) {
  // Response copies its headers when built, so one Headers object serves every answer (as the node's
  // validate fast path does).
  const headers = new Headers({ 'content-type': JSON_TYPE, ...CORS_HEADERS })
  const init = { status: 200, headers }
  return async (request: Request): Promise<Response> => {
    const requestId = requestIdOf(request)
    let nonce: string | null = null
    let digest: string | null = null
    let response: Response
    let text: string
    try {
      nonce = nonceOf(request.headers)
      checkDeclaredLength(request.headers.get('content-length'), BODY_LIMIT)
      checkQuery(request.url)
      const bytes = await readBody(request)
      if (nonce !== null) digest = requestDigestOf(bytes) // the signed answer covers the exact bytes received
      const body = parseJson(bytes)
      if (!check.Check(body)) throw toAppError('VALIDATION', new ValidationError('body', check, body), d.log, requestId)
      text = JSON.stringify(handle(body as B))
      headers.set('x-request-id', requestId)
      response = new Response(text, init)
    } catch (err) {
      const problem = problemResponse(toAppError('UNKNOWN', err, d.log, requestId), requestId, CORS)
      text = await problem.text()
      response = new Response(text, { status: problem.status, headers: problem.headers })
      // A problem found before the body was read is signed over the body, when it was received (within
      // the limit); a body over the limit was not: that answer goes out unsigned, as Keyward's 413.
      if (nonce !== null && digest === null && !request.bodyUsed && !(Number(request.headers.get('content-length') ?? 0) > BODY_LIMIT)) {
        digest = await readBody(request).then(requestDigestOf, () => null)
      }
    }
    const key = nonce !== null && digest !== null ? answerKeyOf(d) : null
    if (key !== null) {
      response.headers.set(SIGNATURE_HEADER, signatureOf(key, { path, nonce: nonce!, requestDigest: digest! }, text))
      response.headers.set(CERTIFICATE_HEADER, key.certificate!)
    }
    return response
  }
}

const preflight = (request: Request) =>
  new Response(null, { status: 204, headers: { ...CORS_HEADERS, ...preflightHeaders('POST'), 'x-request-id': requestIdOf(request) } })

const sha256 = (s: string) => createHash('sha256').update(s).digest()

function admitted(d: RelayServerDeps, request: Request): boolean {
  const auth = request.headers.get('authorization') ?? ''
  const token = auth.startsWith('Bearer ') ? auth.slice(7).trim() : ''
  return token.length > 0 && timingSafeEqual(sha256(token), Buffer.from(d.adminTokenHash, 'hex'))
}

function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), { status, headers: { 'content-type': JSON_TYPE, 'cache-control': 'no-store' } })
}

/** The page's calls: each admitted by the admin token (401 otherwise), problems as everywhere. */
function adminRoute(d: RelayServerDeps, handle: (request: Request) => Promise<unknown> | unknown) {
  return async (request: Request): Promise<Response> => {
    const requestId = requestIdOf(request)
    try {
      if (!admitted(d, request)) throw new AppError('unauthorized', 'The admin token is missing or wrong')
      return json(await handle(request))
    } catch (err) {
      return problemResponse(toAppError('UNKNOWN', err, d.log, requestId), requestId)
    }
  }
}

export function relayState(d: RelayServerDeps) {
  const l = d.pool.license
  const p = l?.payload
  return {
    license: p
      ? {
          relay_id: p.relay_id,
          license_id: p.id,
          key_id: p.key_id,
          key_prefix: d.pool.keyPrefix,
          product_id: p.product_id,
          plan: p.plan,
          seats: p.seats,
          lease_seconds: p.lease_seconds,
          expires_at: p.expires_at,
          key_expires_at: p.key_expires_at,
          issued_at: p.issued_at,
        }
      : null,
    status: d.pool.status,
    last_check_in_at: d.pool.lastCheckInAt === null ? null : new Date(d.pool.lastCheckInAt).toISOString(),
    upstream_url: d.upstreamUrl,
    leases: d.pool.list(),
    request_code: d.requestCode,
  }
}

async function bodyOf(request: Request): Promise<Record<string, unknown>> {
  checkDeclaredLength(request.headers.get('content-length'), BODY_LIMIT)
  return parseJson(await readBody(request)) as Record<string, unknown>
}

export function relayRoutes(d: RelayServerDeps) {
  const validate = TypeCompiler.Compile(ValidateBody)
  const deactivate = TypeCompiler.Compile(DeactivateBody)
  const devices = TypeCompiler.Compile(DevicesBody)
  return {
    '/': page,
    '/healthz': () => new Response('ok'),
    '/v1/validate': { POST: holderRoute(d, '/v1/validate', validate, (b: ValidateBody) => d.pool.validate(b)), OPTIONS: preflight },
    '/v1/deactivate': { POST: holderRoute(d, '/v1/deactivate', deactivate, (b: DeactivateBody) => d.pool.deactivate(b)), OPTIONS: preflight },
    '/v1/devices': { POST: holderRoute(d, '/v1/devices', devices, (b: DevicesBody) => d.pool.devices(b)), OPTIONS: preflight },
    '/relay/api/state': { GET: adminRoute(d, () => relayState(d)) },
    '/relay/api/release': {
      POST: adminRoute(d, async (request) => {
        const b = await bodyOf(request)
        if (typeof b.device_fingerprint !== 'string' || !/^[0-9a-fA-F]{64}$/.test(b.device_fingerprint)) throw invalid('body.device_fingerprint', 'must be 64 hex characters')
        return { released: d.pool.release(b.device_fingerprint.toLowerCase()) }
      }),
    },
    '/relay/api/license': {
      POST: adminRoute(d, async (request) => {
        const b = await bodyOf(request)
        if (typeof b.license !== 'string' || b.license.length < 1 || b.license.length > 32_768) throw invalid('body.license', 'must be the relay license text')
        if (b.key !== undefined && (typeof b.key !== 'string' || b.key.length < 1 || b.key.length > 256)) throw invalid('body.key', 'must be the key value (1..256 characters)')
        try {
          d.load(b.license, b.key as string | undefined)
        } catch (err) {
          if (err instanceof RelayLicenseError) throw invalid('body.license', err.message)
          if (err instanceof AppError) throw err
          throw invalid('body.license', (err as Error).message)
        }
        return relayState(d)
      }),
    },
    '/relay/api/check-in': {
      POST: adminRoute(d, async () => {
        if (d.checkInNow === null) throw invalid('upstream', 'no UPSTREAM_URL is set: this relay does not check in')
        return await d.checkInNow()
      }),
    },
  }
}

/** Anything else: Keyward's 404 problem. */
export const notFound = (request: Request) => problemResponse(new AppError('not_found', 'No such route'), requestIdOf(request))

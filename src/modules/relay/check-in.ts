// Check-in: the relay's only call out (docs/integrating.md, "Floating seats on your customer's network").
// Every CHECK_IN_SECONDS it reports its leases to UPSTREAM_URL at POST /v1/relays/:id/check-in, signed
// by its own key (no token: `Keyward-Relay-Signature: t=<unix ms>, sig=<base64 Ed25519 over
// "keyward-relay-checkin/v1\n" + t + "\n" + request_sha256>`), and installs what it hears: a renewed
// license while the key is valid; any other status and the relay answers the key's reason from then
// on. Unreachable, it keeps serving on what it has until its license expires.
import { createHash, sign, type KeyObject } from 'node:crypto'
import type { Logger } from '../../infra/log'
import { UPSTREAM_STATUSES, type LeasePool, type UpstreamStatus } from './pool'
import { RelayLicenseError, splitLicenseFile, type RelayLicense } from './text'

export const CHECK_IN_DOMAIN = 'keyward-relay-checkin/v1\n'
export const RELAY_SIGNATURE_HEADER = 'keyward-relay-signature'

export function checkInSignature(privateKey: KeyObject, body: string | Uint8Array, t: number): string {
  const digest = createHash('sha256').update(body).digest('hex')
  return `t=${t}, sig=${sign(null, Buffer.from(`${CHECK_IN_DOMAIN}${t}\n${digest}`, 'utf8'), privateKey).toString('base64')}`
}

export interface CheckInDeps {
  pool: LeasePool
  upstreamUrl: string
  privateKey: KeyObject
  /** Verifies a renewed license as `relay load` does (the pinned root, this key pair and machine). */
  verify: (text: string, certificate: string | null) => RelayLicense
  log: Logger
  now?: () => number
  fetch?: typeof fetch
}

export type CheckInOutcome = { ok: true; status: UpstreamStatus; renewed: boolean } | { ok: false; error: string }

/** One check-in; never throws. */
export async function checkIn(d: CheckInDeps): Promise<CheckInOutcome> {
  const license = d.pool.license
  if (license === null) return { ok: false, error: 'no license loaded' }
  const now = (d.now ?? Date.now)()
  const p = license.payload
  const leases = d.pool.list(now).map((l) => ({ device_fingerprint: l.device_fingerprint, device_name: l.device_name, since: l.since }))
  const peak = Math.max(d.pool.peak, leases.length)
  const body = JSON.stringify({ relay_id: p.relay_id, license_id: p.id, t: now, peak, leases })
  let res: Response
  try {
    res = await (d.fetch ?? fetch)(`${d.upstreamUrl}/v1/relays/${encodeURIComponent(p.relay_id)}/check-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [RELAY_SIGNATURE_HEADER]: checkInSignature(d.privateKey, body, now) },
      body,
      signal: AbortSignal.timeout(10_000),
    })
  } catch (err) {
    d.log.warn({ err: (err as Error).message }, 'relay check-in: upstream unreachable; serving on the current license')
    return { ok: false, error: 'unreachable' }
  }
  let answer: Record<string, unknown> | null = null
  try {
    answer = (await res.json()) as Record<string, unknown>
  } catch {
    answer = null
  }
  // Only a status said by the upstream changes what the relay answers: a 401 (an unknown relay, a
  // clock more than 5 minutes off) or a 404 (a wrong UPSTREAM_URL) is logged and changes nothing.
  if (!res.ok || !answer || !UPSTREAM_STATUSES.includes(answer.status as UpstreamStatus)) {
    d.log.warn({ status: res.status }, 'relay check-in refused by the upstream')
    return { ok: false, error: `upstream answered ${res.status}` }
  }
  const status = answer.status as UpstreamStatus
  let renewed = false
  const text = typeof answer.license === 'string' ? answer.license : typeof answer.relay_license === 'string' ? answer.relay_license : null
  if (status === 'valid' && text !== null) {
    try {
      const split = splitLicenseFile(text)
      const next = d.verify(split.license, split.certificate ?? (typeof answer.relay_certificate === 'string' ? answer.relay_certificate : null))
      if (next.payload.relay_id === p.relay_id) {
        d.pool.install(next)
        renewed = true
      }
    } catch (err) {
      d.log.warn({ code: err instanceof RelayLicenseError ? err.code : 'error' }, 'relay check-in: the renewed license does not verify; kept the current one')
    }
  }
  return record(d, status, renewed, now)
}

function record(d: CheckInDeps, status: UpstreamStatus, renewed: boolean, now: number): CheckInOutcome {
  d.pool.checkedIn(status, now)
  d.pool.peak = d.pool.held(now)
  return { ok: true, status, renewed }
}

/** Checks in now and every `seconds` until stopped. */
export function startCheckIns(d: CheckInDeps, seconds: number): { stop(): void; now(): Promise<CheckInOutcome> } {
  let stopped = false
  let timer: ReturnType<typeof setTimeout> | null = null
  const run = async () => {
    timer = null
    await checkIn(d)
    if (!stopped) timer = setTimeout(run, seconds * 1000)
  }
  timer = setTimeout(run, 0)
  return {
    stop() {
      stopped = true
      if (timer) clearTimeout(timer)
    },
    now: () => checkIn(d),
  }
}

// What a relay does on the wire (docs/api.md, "Relays"), written with node:crypto only, never the
// service's own code: its key pair and request code, and a signed check-in. The tests prove the
// formats work as documented.
import { createHash, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto'
import { randomBytes } from 'node:crypto'
import type { Client } from './harness'
import { envelopeOf, payloadOf } from './offline'

export interface RelayIdentity {
  privateKey: KeyObject
  publicKey: KeyObject
  /** raw 32 bytes */
  raw: Buffer
  fingerprint: string
  components: Record<string, string>
  name: string
}

export function relayIdentity(name = 'lab-relay'): RelayIdentity {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url')
  const hex = () => randomBytes(32).toString('hex')
  return { privateKey, publicKey, raw, fingerprint: hex(), components: { machine_id: hex(), disk: hex() }, name }
}

/** `keyward relay request`'s output: KWRLY1. + base64url of the JSON (fields overridable for bad input). */
export function requestCode(r: RelayIdentity, over: Record<string, unknown> = {}): string {
  const json = { v: 1, relay_public_key: r.raw.toString('base64url'), device_fingerprint: r.fingerprint, components: r.components, name: r.name, ...over }
  return `KWRLY1.${Buffer.from(JSON.stringify(json)).toString('base64url')}`
}

export function createRelay(call: Client, token: string, keyId: string, body: Record<string, unknown>) {
  return call('POST', `/v1/keys/${keyId}/relays`, { token, body })
}

/** The header a relay sends: t and its signature over the context, t and the body's SHA-256. */
export function checkInSignature(key: KeyObject, t: number, body: string): string {
  const digest = createHash('sha256').update(body).digest('hex')
  const sig = sign(null, Buffer.from(`keyward-relay-checkin/v1\n${t}\n${digest}`), key).toString('base64')
  return `t=${t}, sig=${sig}`
}

export interface CheckInOptions {
  t?: number
  signWith?: KeyObject
  /** the header as sent (overrides the signature) */
  header?: string | null
  /** the body as sent (overrides the fields) */
  raw?: string
  peak?: number
  leases?: { device_fingerprint: string; device_name: string | null; since: string }[]
  bodyOver?: Record<string, unknown>
}

export function checkIn(call: Client, relay: RelayIdentity, relayId: string, licenseId: string, o: CheckInOptions = {}) {
  const t = o.t ?? Date.now()
  const leases = o.leases ?? []
  const raw = o.raw ?? JSON.stringify({ relay_id: relayId, license_id: licenseId, t, peak: o.peak ?? leases.length, leases, ...o.bodyOver })
  const header = o.header !== undefined ? o.header : checkInSignature(o.signWith ?? relay.privateKey, t, raw)
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (header !== null) headers['keyward-relay-signature'] = header
  return call('POST', `/v1/relays/${relayId}/check-in`, { raw, headers })
}

/** A KWCERT1's payload JSON and whether `signer` signed it. */
export function certificateOf(text: string, signer: KeyObject): { payload: any; signed: boolean } {
  const [prefix, payload, sig] = text.split('.')
  const signed = verify(null, Buffer.from(`${prefix}.${payload}`, 'ascii'), signer, Buffer.from(sig!, 'base64url'))
  return { payload: JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')), signed }
}

export { envelopeOf, payloadOf }

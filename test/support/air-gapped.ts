// Air-gapped codes made the way the SDK makes them (docs/api.md, "Air-gapped activation"): an Ed25519
import { expect } from 'bun:test'
// device key pair, a KWREQ1 request, a KWDEA1 deactivation signed by the device key; and readers of
// the server's KWRES1 and KWRCP1 texts.
import { generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto'
import { randomBytes } from 'node:crypto'
import { fingerprint as randomFingerprint } from './harness'

export interface Device {
  fingerprint: string
  privateKey: KeyObject
  publicKey: KeyObject
  /** raw 32 bytes, base64url */
  publicKeyRaw: string
}

export function newDevice(fp = randomFingerprint()): Device {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  return { fingerprint: fp, privateKey, publicKey, publicKeyRaw: publicKey.export({ format: 'jwk' }).x! }
}

const b64url = (json: unknown) => Buffer.from(JSON.stringify(json), 'utf8').toString('base64url')

export function requestCode(
  device: Device,
  key: string,
  extra: { components?: Record<string, string> | null; device_name?: string; nonce?: string; t?: number; fields?: Record<string, unknown> } = {},
): { code: string; nonce: string } {
  const nonce = extra.nonce ?? randomBytes(18).toString('base64url')
  const body: Record<string, unknown> = {
    v: 1,
    key,
    device_fingerprint: device.fingerprint,
    ...(extra.components ? { components: extra.components } : {}),
    ...(extra.device_name ? { device_name: extra.device_name } : {}),
    device_public_key: device.publicKeyRaw,
    nonce,
    t: extra.t ?? Date.now(),
    ...(extra.fields ?? {}),
  }
  return { code: `KWREQ1.${b64url(body)}`, nonce }
}

/** A raw request code of any JSON (for the 400s). */
export const rawRequest = (body: unknown) => `KWREQ1.${b64url(body)}`

export function deactivationCode(device: Device, ids: { license_id: string; activation_id: string }, signer: KeyObject = device.privateKey, t = Date.now()): string {
  const signed = `KWDEA1.${b64url({ v: 1, license_id: ids.license_id, activation_id: ids.activation_id, device_fingerprint: device.fingerprint, t })}`
  return `${signed}.${sign(null, Buffer.from(signed, 'ascii'), signer).toString('base64url')}`
}

/** The offline license text inside a KWRES1 response code. */
export function licenseOfResponse(response: string): string {
  expect(response.startsWith('KWRES1.')).toBe(true)
  expect(response.slice(7)).toMatch(/^[A-Za-z0-9_-]+$/)
  return Buffer.from(response.slice(7), 'base64url').toString('utf8')
}

export interface Receipt {
  body: { activation_id: string; license_id: string; released_at: string; kid: string }
  signed: string
  signature: Buffer
  certificate: string | null
}

export function receiptOf(text: string): Receipt {
  const parts = text.split('.')
  expect(parts[0]).toBe('KWRCP1')
  expect(parts.length === 3 || parts.length === 6).toBe(true)
  for (const p of parts.slice(1)) expect(p).toMatch(/^[A-Za-z0-9_-]+$/)
  return {
    body: JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')),
    signed: `${parts[0]}.${parts[1]}`,
    signature: Buffer.from(parts[2]!, 'base64url'),
    certificate: parts.length === 6 ? parts.slice(3).join('.') : null,
  }
}

export const receiptVerifies = (r: Receipt, key: KeyObject) => verify(null, Buffer.from(r.signed, 'ascii'), key, r.signature)
